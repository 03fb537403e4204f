// Package eventwriter writes the Events that never repeat for one object (a delegate's creation,
// once per proxy) each with one create of its own, and hands every other Event to client-go's
// recorder. That recorder keeps each Event it sent for 6 minutes to count its repeats: an entry
// per elected pod that is never used, about 1.4 KiB of the leader's heap per pod in a burst.
package eventwriter
