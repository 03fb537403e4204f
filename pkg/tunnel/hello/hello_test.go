package hello

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestHelloRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	want := Hello{Cluster: "secondary2", Token: "eyJ.token"}
	if err := Write(&buf, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(bufio.NewReader(&buf))
	if err != nil || got != want {
		t.Fatalf("readHello = %+v, %v; want %+v", got, err, want)
	}
}

func TestReadHelloRefuses(t *testing.T) {
	long := protocolLine + ` {"cluster":"a","token":"` + strings.Repeat("x", MaxBytes) + `"}` + "\n"
	for name, tc := range map[string]struct{ line, says string }{
		"another protocol":    {"GET / HTTP/1.1\r\n", "not FLOTILLA-TUNNEL/1"},
		"another version":     {"FLOTILLA-TUNNEL/2 {}\n", "not FLOTILLA-TUNNEL/1"},
		"no end within bound": {long, "longer than"},
		"no end at all":       {protocolLine + ` {"cluster":"a"`, "EOF"},
		"not JSON":            {protocolLine + " hello\n", "invalid character"},
		"an unknown field":    {protocolLine + ` {"cluster":"a","token":"t","admin":true}` + "\n", "unknown field"},
		"two values":          {protocolLine + ` {"cluster":"a","token":"t"} {}` + "\n", "data after the hello"},
		"a bad cluster name":  {protocolLine + ` {"cluster":"A_b","token":"t"}` + "\n", `cluster "A_b" is no DNS label`},
		"no cluster":          {protocolLine + ` {"token":"t"}` + "\n", `cluster "" is no DNS label`},
		"no token":            {protocolLine + ` {"cluster":"a"}` + "\n", "no token"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Read(bufio.NewReaderSize(strings.NewReader(tc.line), 4096))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("readHello = %v; want a malformed hello saying %q", err, tc.says)
			}
		})
	}
}

func TestWriteHelloRefusesAHelloPastTheBound(t *testing.T) {
	err := Write(&bytes.Buffer{}, Hello{Cluster: "a", Token: strings.Repeat("x", MaxBytes)})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("writeHello = %v; want a malformed hello", err)
	}
}

func TestReplies(t *testing.T) {
	for name, tc := range map[string]struct {
		refusal error
		refused string
	}{
		"accepted": {},
		"refused":  {refusal: errors.New("not authorized\nfor this cluster"), refused: "not authorized for this cluster"},
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := WriteReply(&buf, tc.refusal); err != nil {
				t.Fatal(err)
			}
			err := ReadReply(bufio.NewReader(&buf))
			var refused *RefusedError
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("readReply = %v; want nil", err)
			case tc.refused != "" && (!errors.As(err, &refused) || refused.Reason != tc.refused):
				t.Fatalf("readReply = %v; want the refusal %q", err, tc.refused)
			}
		})
	}
	if err := ReadReply(bufio.NewReader(strings.NewReader("HTTP/1.1 400\n"))); !errors.Is(err, ErrMalformed) {
		t.Fatalf("readReply of another protocol = %v", err)
	}
}

// FuzzReadHello: whatever the bytes, readHello never panics, never reads a line past its bound,
// and what it accepts is a hello writeHello writes again (unless escaping makes it too long) to a
// line it reads back the same.
func FuzzReadHello(f *testing.F) {
	f.Add([]byte(protocolLine + ` {"cluster":"secondary2","token":"t"}` + "\n"))
	f.Add([]byte(protocolLine + " {}\n"))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte(protocolLine + ` {"cluster":"a","token":"t"}` + "\nmore"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := Read(bufio.NewReaderSize(bytes.NewReader(data), 4096))
		if end := bytes.IndexByte(data, '\n'); err == nil && (end < 0 || end > MaxBytes) {
			t.Fatalf("accepted a first line of %d bytes", end)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("an error outside the malformed class: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		if err := Write(&buf, h); err != nil {
			// JSON may escape what came raw (a "<" is six bytes written), so a hello read near
			// the bound may write past it: refused by length, and only so.
			if errors.Is(err, ErrMalformed) && strings.Contains(err.Error(), "at most") {
				return
			}
			t.Fatalf("an accepted hello does not write again: %v", err)
		}
		again, err := Read(bufio.NewReader(&buf))
		if err != nil || again != h {
			t.Fatalf("an accepted hello reads back as %+v, %v", again, err)
		}
	})
}
