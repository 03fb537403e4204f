// Package kubeletports is the range the virtual nodes' kubelet ports come from, and who holds a
// port: package virtualnode gives the ports, package kubeletapi serves them, and both must agree
// on a port two nodes advertise.
package kubeletports
