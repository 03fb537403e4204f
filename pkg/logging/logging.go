package logging

import (
	"fmt"
	"io"
	"strings"

	"github.com/bombsimon/logrusr/v4"
	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
)

// Verbosity levels of logr calls: V(Info) says what happened, V(Debug) how it happened, V(Trace)
// every step. logrusr maps V(n) to the logrus level n steps below info, so V(1) is logrus' debug
// and V(2) its trace; anything higher would never be written.
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
	// Level is a logrus level: panic, fatal, error, warn, info, debug, trace.
	Level string
	// Format is text or json.
	Format string
}

// AddFlags registers --log-level and --log-format.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Level, "log-level", "info", "log level: error, warn, info, debug or trace (debug shows V(1) logs, trace V(2))")
	fs.StringVar(&o.Format, "log-format", FormatText, "log format: text or json")
}

// New builds the logrus logger writing to w and returns it as a logr.Logger.
func New(o Options, w io.Writer) (logr.Logger, error) {
	l, err := NewLogrus(o, w)
	if err != nil {
		return logr.Discard(), err
	}
	return logrusr.New(l, logrusr.WithReportCaller()), nil
}

// NewLogrus builds the logrus logger itself, for libraries that log through logrus
// (virtual-kubelet).
func NewLogrus(o Options, w io.Writer) (*logrus.Logger, error) {
	if o.Level == "" {
		o.Level = "info"
	}
	level, err := logrus.ParseLevel(o.Level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want one of error, warn, info, debug, trace", o.Level)
	}
	l := logrus.New()
	l.SetOutput(w)
	l.SetLevel(level)
	switch strings.ToLower(o.Format) {
	case "", FormatText:
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, DisableColors: true})
	case FormatJSON:
		l.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", o.Format)
	}
	return l, nil
}
