// Package logging owns how Flotilla's processes log, so that every library they link logs one way:
// the standard library's slog does the writing (text or JSON, a level flag, the caller's source
// line), and a logr.Logger over that handler is what controller-runtime, client-go (klog) and
// Flotilla's own code receive; virtual-kubelet gets the same handler through its slog adapter.
// Code gets its logger from the context, never from a global.
//
// # Usage
//
//	opts := logging.Options{}
//	opts.AddFlags(pflag.CommandLine)
//	pflag.Parse()
//	log, err := logging.New(opts, os.Stderr)
//	ctrl.SetLogger(log)
package logging
