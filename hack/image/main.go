// Command image builds a single-binary container image without Docker (internal/ociimage)
// and writes it as a docker-save tarball, an OCI layout, or pushes it. make image and
// make image-push run it; docs/release.md shows the whole release.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/spf13/pflag"

	"github.com/flotilla-dev/flotilla/internal/ociimage"
)

const usage = `Build a container image holding one static binary, without Docker.

The image has no base: one layer with the binary at --entrypoint (mode 0755, owner 0:0),
run as the numeric --user. It is reproducible: timestamps come from SOURCE_DATE_EPOCH,
else the Unix epoch. Give one --binary per platform and exactly one output:

  --out FILE     a docker-save tarball of one platform (--platform, needed with several
                 binaries), for ctr -n k8s.io images import FILE, docker load or kind load
  --layout DIR   an OCI image layout with an index of every platform
  --push         push an index of every platform to --ref, with the credentials of
                 docker login (or podman login, crane auth login)

Examples:
  go run ./hack/image --ref ghcr.io/flotilla-dev/flotilla-manager:0.1.0 \
    --entrypoint /flotilla-manager --user 65532:65532 \
    --binary linux/amd64=bin/image/linux_amd64/flotilla-manager --out bin/image/flotilla-manager.tar
  go run ./hack/image --ref registry.example.com/flotilla-manager:0.1.0 \
    --entrypoint /flotilla-manager --user 65532:65532 \
    --binary linux/amd64=amd64/flotilla-manager --binary linux/arm64=arm64/flotilla-manager --push

Flags:
`

type options struct {
	spec     ociimage.Spec
	binaries []string
	labels   []string
	out      string
	platform string
	layout   string
	push     bool
}

func main() {
	var o options
	fs := pflag.NewFlagSet("image", pflag.ContinueOnError)
	fs.StringVar(&o.spec.Ref, "ref", "", "image reference with a tag, e.g. ghcr.io/flotilla-dev/flotilla-manager:0.1.0")
	fs.StringVar(&o.spec.Entrypoint, "entrypoint", "", "absolute path of the binary in the image, e.g. /flotilla-manager")
	fs.StringVar(&o.spec.User, "user", "", "numeric uid[:gid] the binary runs as, e.g. 65532:65532")
	fs.StringArrayVar(&o.binaries, "binary", nil, "PLATFORM=PATH of a static binary, e.g. linux/amd64=bin/flotilla-manager (repeat per platform)")
	fs.StringArrayVar(&o.labels, "label", nil, "KEY=VALUE label of the image config (repeatable)")
	fs.StringVar(&o.out, "out", "", "write a docker-save tarball of one platform to this file")
	fs.StringVar(&o.platform, "platform", "", "platform of --out (default: the only --binary)")
	fs.StringVar(&o.layout, "layout", "", "write an OCI image layout of every platform into this directory")
	fs.BoolVar(&o.push, "push", false, "push an index of every platform to --ref")
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprint(os.Stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(2)
	}
	// Only a main creates the root context (.golangci.yml lets cmd/ and hack/*/main.go do it).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if outputs(o) != 1 {
		return errors.New("want exactly one of --out, --layout and --push (see --help)")
	}
	if o.platform != "" && o.out == "" {
		return errors.New("--platform chooses the image of --out; --layout and --push take every platform")
	}
	var err error
	if o.spec.Binaries, err = pairs("--binary", o.binaries); err != nil {
		return err
	}
	if o.spec.Labels, err = pairs("--label", o.labels); err != nil {
		return err
	}
	switch {
	case o.out != "":
		err = ociimage.WriteTarball(o.spec, o.platform, o.out)
		if err == nil {
			fmt.Printf("wrote %s (%s)\n", o.out, o.spec.Ref)
		}
	case o.layout != "":
		err = ociimage.WriteLayout(o.spec, o.layout)
		if err == nil {
			fmt.Printf("wrote the OCI layout %s (%s)\n", o.layout, o.spec.Ref)
		}
	default:
		err = ociimage.Push(ctx, o.spec)
		if err == nil {
			fmt.Printf("pushed %s\n", o.spec.Ref)
		}
	}
	return err
}

// outputs counts the outputs asked for.
func outputs(o options) int {
	n := 0
	for _, set := range []bool{o.out != "", o.layout != "", o.push} {
		if set {
			n++
		}
	}
	return n
}

// pairs reads KEY=VALUE arguments of flag into a map, refusing a key given twice.
func pairs(flag string, args []string) (map[string]string, error) {
	if len(args) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, a)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%s %s is given twice", flag, k)
		}
		m[k] = v
	}
	return m, nil
}
