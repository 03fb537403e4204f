package tunnel

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// protocolLine opens every tunnel connection, so that a client of another protocol is told
	// apart at its first bytes.
	protocolLine = "FLOTILLA-TUNNEL/1"
	// MaxHelloBytes bounds the handshake's first line (the protocol, a space, the JSON hello): a
	// ServiceAccount token is about 1 KiB, a cluster name at most 63 bytes.
	MaxHelloBytes = 16 << 10
	// replyOK accepts a hello; anything else is "ERR <reason>".
	replyOK = "OK"
)

// Hello is what an agent says first: the cluster it serves and its credential.
type Hello struct {
	// Cluster is the name the agent claims: its cluster's name in the primary.
	Cluster string `json:"cluster"`
	// Token is its credential, which the server maps to the one cluster it belongs to.
	Token string `json:"token"`
}

// errHello is the class of every malformed hello.
var errHello = errors.New("malformed hello")

// writeHello writes the handshake's first line.
func writeHello(w io.Writer, h Hello) error {
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding the hello: %w", err)
	}
	line := protocolLine + " " + string(raw) + "\n"
	if len(line) > MaxHelloBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", errHello, len(line), MaxHelloBytes)
	}
	_, err = io.WriteString(w, line)
	return err
}

// readHello reads the handshake's first line from r, reading no more than MaxHelloBytes: a line
// that does not end within them, or that is not the protocol followed by a hello naming a valid
// cluster and a token, is refused.
func readHello(r *bufio.Reader) (Hello, error) {
	line, err := readLine(r, MaxHelloBytes)
	if err != nil {
		return Hello{}, err
	}
	rest, ok := bytes.CutPrefix(line, []byte(protocolLine+" "))
	if !ok {
		return Hello{}, fmt.Errorf("%w: not %s", errHello, protocolLine)
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	var h Hello
	if err := dec.Decode(&h); err != nil {
		return Hello{}, fmt.Errorf("%w: %w", errHello, err)
	}
	if dec.More() {
		return Hello{}, fmt.Errorf("%w: data after the hello", errHello)
	}
	if msgs := validation.IsDNS1123Label(h.Cluster); len(msgs) > 0 {
		return Hello{}, fmt.Errorf("%w: cluster %q: %s", errHello, h.Cluster, strings.Join(msgs, "; "))
	}
	if h.Token == "" {
		return Hello{}, fmt.Errorf("%w: no token", errHello)
	}
	return h, nil
}

// readLine reads up to and without the next newline, failing past limit bytes: bufio's ReadSlice
// keeps the buffer's bound, so a line without end costs no more than the buffer.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, fmt.Errorf("%w: longer than %d bytes", errHello, limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, fmt.Errorf("%w: %w", errHello, err)
		}
	}
}

// writeReply answers a hello: OK, or ERR and the reason on one line.
func writeReply(w io.Writer, refusal error) error {
	line := replyOK
	if refusal != nil {
		line = "ERR " + strings.ReplaceAll(refusal.Error(), "\n", " ")
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// readReply reads the server's answer: nil for OK, else the refusal it gave.
func readReply(r *bufio.Reader) error {
	line, err := readLine(r, 4096)
	if err != nil {
		return fmt.Errorf("reading the tunnel endpoint's answer: %w", err)
	}
	if string(line) == replyOK {
		return nil
	}
	if reason, ok := strings.CutPrefix(string(line), "ERR "); ok {
		return &RefusedError{Reason: reason}
	}
	return fmt.Errorf("%w: the tunnel endpoint answered %q", errHello, line)
}

// RefusedError is the tunnel endpoint's refusal of an agent's hello.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "the tunnel endpoint refused the agent: " + e.Reason }
