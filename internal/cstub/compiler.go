package cstub

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// EnvCompiler names the C compiler Build uses (a command in PATH or a
// path), overriding its own choice.
const EnvCompiler = "ULYSSES_STUB_CC"

// target is what Build knows of one GOARCH: the first word of what a
// compiler for it answers to -dumpmachine, and Debian's cross compiler for
// it on linux.
type target struct {
	machines []string // e.g. "aarch64" for "aarch64-linux-gnu"
	cross    string   // e.g. "aarch64-linux-gnu-gcc"
}

// targets are the GOARCHes whose compiler Build checks; for any other, cc
// is taken as it is.
var targets = map[string]target{
	"amd64":   {[]string{"x86_64", "amd64"}, "x86_64-linux-gnu-gcc"},
	"arm64":   {[]string{"aarch64", "arm64"}, "aarch64-linux-gnu-gcc"},
	"386":     {[]string{"i386", "i486", "i586", "i686"}, "i686-linux-gnu-gcc"},
	"ppc64le": {[]string{"powerpc64le", "ppc64le"}, "powerpc64le-linux-gnu-gcc"},
	"riscv64": {[]string{"riscv64"}, "riscv64-linux-gnu-gcc"},
	"s390x":   {[]string{"s390x"}, "s390x-linux-gnu-gcc"},
	"loong64": {[]string{"loongarch64"}, "loongarch64-linux-gnu-gcc"},
}

// compiler returns the path of the C compiler that builds libraries a
// process of goos/goarch can load: $ULYSSES_STUB_CC when set; else cc when
// it targets goarch (as cc -dumpmachine says; one short run of cc) or
// cannot say; else, on linux, the GNU cross compiler for goarch, such as
// aarch64-linux-gnu-gcc for a test binary of linux/arm64 run under
// emulation on an amd64 host. The error matches ErrNoCompiler when none is
// found, and says where to get one.
func compiler(goos, goarch string) (string, error) {
	if cc := os.Getenv(EnvCompiler); cc != "" {
		path, err := exec.LookPath(cc)
		if err != nil {
			return "", fmt.Errorf("%w for %s/%s: %s=%s: %v", ErrNoCompiler, goos, goarch, EnvCompiler, cc, err)
		}
		return path, nil
	}
	t, known := targets[goarch]
	cc, ccErr := exec.LookPath("cc")
	if ccErr == nil && (!known || t.accepts(cc)) {
		return cc, nil
	}
	if known && goos == "linux" {
		if path, err := exec.LookPath(t.cross); err == nil {
			return path, nil
		}
	}
	return "", noCompiler(goos, goarch, ccErr == nil, t, known)
}

// noCompiler is compiler's error when it found none: what it looked for
// and where to get one.
func noCompiler(goos, goarch string, haveCC bool, t target, known bool) error {
	why := "cc is not in PATH"
	if haveCC {
		why = "cc does not target " + goarch
	}
	get := "install gcc or clang"
	if known && goos == "linux" {
		why += ", nor is " + t.cross
		get = "on Debian: apt-get install " + debianPackage(t.cross)
		if !haveCC {
			get += ", or gcc to build for the host"
		}
	}
	return fmt.Errorf("%w for %s/%s: %s (%s; or set %s)", ErrNoCompiler, goos, goarch, why, get, EnvCompiler)
}

// accepts reports whether the compiler at cc targets t, or cannot say
// (-dumpmachine fails or answers nothing).
func (t target) accepts(cc string) bool {
	out, err := exec.Command(cc, "-dumpmachine").Output()
	machine, _, _ := strings.Cut(strings.TrimSpace(string(out)), "-")
	if err != nil || machine == "" {
		return true
	}
	for _, m := range t.machines {
		if machine == m {
			return true
		}
	}
	return false
}

// debianPackage is the Debian package of the cross compiler cross:
// gcc-aarch64-linux-gnu for aarch64-linux-gnu-gcc.
func debianPackage(cross string) string {
	return "gcc-" + strings.ReplaceAll(strings.TrimSuffix(cross, "-gcc"), "_", "-")
}
