package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/api/resource"
)

// softMemoryShare is the part of the container's memory limit given to Go as its soft limit: the
// rest is for what the Go runtime does not count (thread stacks, cgo) and for a margin.
const softMemoryShare = 0.9

// softMemoryLimit is the soft memory limit, in bytes, for a container memory limit ("" or "0": none,
// 0 returned). Go lets its heap grow to twice what is live before it collects (GOGC=100): a
// manager with 250 MiB live could pass a 512 MiB limit in a burst and be OOM-killed, where a
// soft limit makes it collect sooner instead.
func softMemoryLimit(containerLimit string) (int64, error) {
	if containerLimit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(containerLimit)
	if err != nil {
		return 0, fmt.Errorf("--container-memory-limit %q: %w", containerLimit, err)
	}
	if q.Sign() <= 0 {
		return 0, nil
	}
	return int64(float64(q.Value()) * softMemoryShare), nil
}

// applySoftMemoryLimit sets Go's soft memory limit from the container's, unless GOMEMLIMIT
// already set one.
func applySoftMemoryLimit(containerLimit string) error {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		setupLog.Info("Soft memory limit from GOMEMLIMIT", "bytes", debug.SetMemoryLimit(-1))
		return nil
	}
	limit, err := softMemoryLimit(containerLimit)
	if err != nil || limit == 0 {
		return err
	}
	debug.SetMemoryLimit(limit)
	setupLog.Info("Soft memory limit", "MiB", limit>>20, "containerLimit", containerLimit)
	return nil
}
