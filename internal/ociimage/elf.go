package ociimage

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"strings"
)

// elfMachines maps GOARCH names to the ELF machine their binaries declare.
var elfMachines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkStaticBinary refuses what would fail only once the image runs: a file that is no
// Linux executable, one built for another architecture, or one that needs a dynamic
// loader (an image without a base has none; Go needs CGO_ENABLED=0 for that).
func checkStaticBinary(path, arch string) error {
	want, ok := elfMachines[arch]
	if !ok {
		return fmt.Errorf("architecture %q: no image support (known: amd64, arm64, arm, 386, ppc64le, s390x, riscv64)", arch)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux executable: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	if f.Machine != want {
		return fmt.Errorf("%s is built for %s, not %s (%s)", path, f.Machine, arch, want)
	}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		interp, err := io.ReadAll(io.LimitReader(prog.Open(), 4096))
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: reading its interpreter: %w", path, err)
		}
		return fmt.Errorf("%s is dynamically linked (it needs %s, which an image without a base lacks): build it static, for Go with CGO_ENABLED=0",
			path, strings.TrimRight(string(interp), "\x00"))
	}
	return nil
}
