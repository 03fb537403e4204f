// Package hello is the tunnel's handshake framing (pkg/tunnel): the agent's one line, the
// protocol and a JSON hello naming the cluster it claims and its credential, and the endpoint's
// one-line answer. It imports nothing but the standard library, so that fuzzing it instruments
// little more than itself.
package hello

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

const (
	// protocolLine opens every tunnel connection, so that a client of another protocol is told
	// apart at its first bytes.
	protocolLine = "FLOTILLA-TUNNEL/1"
	// MaxBytes bounds the handshake's first line (the protocol, a space, the JSON hello): a
	// ServiceAccount token is about 1 KiB, a cluster name at most 63 bytes.
	MaxBytes = 16 << 10
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

// ErrMalformed is the class of every malformed hello or answer.
var ErrMalformed = errors.New("malformed hello")

// dnsLabel is a cluster name: a DNS-1123 label.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Write writes the handshake's first line.
func Write(w io.Writer, h Hello) error {
	raw, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding the hello: %w", err)
	}
	line := protocolLine + " " + string(raw) + "\n"
	if len(line) > MaxBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(line), MaxBytes)
	}
	_, err = io.WriteString(w, line)
	return err
}

// Read reads the handshake's first line from r, reading no more than MaxBytes: a line
// that does not end within them, or that is not the protocol followed by a hello naming a valid
// cluster and a token, is refused.
func Read(r *bufio.Reader) (Hello, error) {
	line, err := readLine(r, MaxBytes)
	if err != nil {
		return Hello{}, err
	}
	rest, ok := bytes.CutPrefix(line, []byte(protocolLine+" "))
	if !ok {
		return Hello{}, fmt.Errorf("%w: not %s", ErrMalformed, protocolLine)
	}
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	var h Hello
	if err := dec.Decode(&h); err != nil {
		return Hello{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if dec.More() {
		return Hello{}, fmt.Errorf("%w: data after the hello", ErrMalformed)
	}
	if !dnsLabel.MatchString(h.Cluster) {
		return Hello{}, fmt.Errorf("%w: cluster %q is no DNS label", ErrMalformed, h.Cluster)
	}
	if h.Token == "" {
		return Hello{}, fmt.Errorf("%w: no token", ErrMalformed)
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
			return nil, fmt.Errorf("%w: longer than %d bytes", ErrMalformed, limit)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
		}
	}
}

// WriteReply answers a hello: OK, or ERR and the reason on one line.
func WriteReply(w io.Writer, refusal error) error {
	line := replyOK
	if refusal != nil {
		line = "ERR " + strings.ReplaceAll(refusal.Error(), "\n", " ")
	}
	_, err := io.WriteString(w, line+"\n")
	return err
}

// ReadReply reads the server's answer: nil for OK, else the refusal it gave.
func ReadReply(r *bufio.Reader) error {
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
	return fmt.Errorf("%w: the tunnel endpoint answered %q", ErrMalformed, line)
}

// RefusedError is the tunnel endpoint's refusal of an agent's hello.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "the tunnel endpoint refused the agent: " + e.Reason }
