package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
)

// Verbosity levels of logr calls: V(Info) says what happened, V(Debug) how it happened, V(Trace)
// every step. logr hands V(n) to slog as level -n: --log-level=debug writes V(1), trace V(2) and
// finer (virtual-kubelet's debug lines too, slog's Debug being -4).
const (
	Info  = 0
	Debug = 1
	Trace = 2
)

// Formats accepted by --log-format.
const (
	FormatText = "text"
	FormatJSON = "json"
)

// Options are the logging flags.
type Options struct {
	// Level is error, warn, info, debug or trace (panic and fatal, logrus' names once, are error).
	Level string
	// Format is text or json.
	Format string
}

// AddFlags registers --log-level and --log-format.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "log level: error, warn, info, debug or trace (debug shows V(1) logs, trace V(2) and finer)")
	fs.StringVar(&o.Format, "log-format", FormatText, "log format: text or json")
}

// levels are the slog levels of --log-level's names.
var levels = map[string]slog.Level{
	"panic": slog.LevelError, "fatal": slog.LevelError, "error": slog.LevelError,
	"warn": slog.LevelWarn, "warning": slog.LevelWarn, "info": slog.LevelInfo,
	"debug": slog.Level(-Debug), "trace": slog.LevelDebug,
}

// NewHandler builds the slog handler writing to w: what every logger of the process writes
// through (Flotilla's, controller-runtime's, klog's, virtual-kubelet's).
func NewHandler(o Options, w io.Writer) (slog.Handler, error) {
	if o.Level == "" {
		o.Level = "info"
	}
	level, ok := levels[strings.ToLower(o.Level)]
	if !ok {
		return nil, fmt.Errorf("--log-level %q: want one of error, warn, info, debug, trace", o.Level)
	}
	opts := &slog.HandlerOptions{Level: level, AddSource: true}
	switch strings.ToLower(o.Format) {
	case "", FormatText:
		return slog.NewTextHandler(w, opts), nil
	case FormatJSON:
		return slog.NewJSONHandler(w, opts), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", o.Format)
	}
}

// New builds the handler writing to w and returns it as a logr.Logger.
func New(o Options, w io.Writer) (logr.Logger, error) {
	h, err := NewHandler(o, w)
	if err != nil {
		return logr.Discard(), err
	}
	return logr.FromSlogHandler(h), nil
}
