// Package logging owns how Flotilla's processes log, so that every library they link logs one way:
// logrus does the writing (text or JSON, a level flag), and a logr.Logger bridged to it through
// logrusr is what controller-runtime, client-go (klog) and Flotilla's own code receive. Code gets
// its logger from the context, never from a global.
//
// # Usage
//
//	opts := logging.Options{}
//	opts.AddFlags(pflag.CommandLine)
//	pflag.Parse()
//	log, err := logging.New(opts, os.Stderr)
//	ctrl.SetLogger(log)
package logging
