package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/ptx"
)

type infoOpts struct{ json bool }

func newInfoFlags() (*flag.FlagSet, *infoOpts) {
	o := &infoOpts{}
	fs := newFlagSet("info", "ulysses info [--json]",
		"Prints the CUDA driver, every GPU (with the kernels it gets: machine code, or PTX the driver compiles), the peer-access matrix and the embedded kernels.")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of text")
	return fs, o
}

func infoMain(args []string, stdout, stderr io.Writer) int {
	fs, o := newInfoFlags()
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	sys, err := a2a.System()
	if err != nil && o.json {
		return jsonError(stdout, stderr, err)
	}
	if err != nil {
		return systemError(stderr, err)
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(newInfoReport(sys)); err != nil {
			fmt.Fprintf(stderr, "ulysses: info: %s\n", oneLine(err))
			return exitFailed
		}
		return 0
	}
	writeInfo(stdout, sys)
	return 0
}

// systemError reports a failed a2a.System (or other driver step) as one
// short line, with what to do where the driver or a GPU is missing, and
// returns the exit status.
func systemError(stderr io.Writer, err error) int {
	msg, code := systemMessage(err)
	fmt.Fprintln(stderr, "ulysses: "+msg)
	return code
}

// jsonError is systemError for info --json: the same line on stderr, and
// {"error": ..., "exit": ...} on stdout, so that a reader of the JSON
// learns why there is none.
func jsonError(stdout, stderr io.Writer, err error) int {
	msg, code := systemMessage(err)
	fmt.Fprintln(stderr, "ulysses: "+msg)
	b, _ := json.Marshal(struct {
		Error string `json:"error"`
		Exit  int    `json:"exit"`
	}{msg, code})
	fmt.Fprintln(stdout, string(b))
	return code
}

// systemMessage is systemError's line and exit status.
func systemMessage(err error) (string, int) {
	switch {
	case errors.Is(err, a2a.ErrNoDriver):
		// The innermost error is the dynamic loader's, which names the file.
		return "no CUDA driver: " + oneLine(innermost(err)) + ": install the NVIDIA driver, which provides libcuda.so.1", exitNoGPU
	case errors.Is(err, a2a.ErrNoDevice):
		return "no GPU (" + lastPart(innermost(err)) + "): run on a machine with an NVIDIA GPU, or check CUDA_VISIBLE_DEVICES", exitNoGPU
	}
	return oneLine(err), exitFailed
}

// innermost is the innermost error of err's chain, following the last of
// several wrapped errors: the driver's or the dynamic loader's own.
func innermost(err error) error {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				next = es[len(es)-1]
			}
		}
		if next == nil {
			return err
		}
		err = next
	}
}

// lastPart is the text of err after its last ": ", on one line: a driver
// error's description without the call and code.
func lastPart(err error) string {
	s := oneLine(err)
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// driverVersion formats the driver's CUDA version: 13000 -> "13.0", 12040 -> "12.4".
func driverVersion(v int) string {
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

func gib(n uint64) string { return strconv.FormatFloat(float64(n)/(1<<30), 'f', 1, 64) }

func writeInfo(w io.Writer, sys a2a.SystemInfo) {
	fmt.Fprintf(w, "CUDA driver %s (%d), %s\n\n", driverVersion(sys.DriverVersion), sys.DriverVersion, sys.Library)

	rows := make([][]string, len(sys.Devices))
	for i, d := range sys.Devices {
		rows[i] = []string{strconv.Itoa(d.Ordinal), d.Name, d.BusID, strconv.Itoa(d.SMs),
			strconv.Itoa(d.ClockKHz / 1000), fmt.Sprintf("%d.%d", d.Major, d.Minor), gib(d.TotalMemory), yesNo(d.Unified),
			yesNo(d.PosixFD), yesNo(d.Fabric), kernelsOf(d)}
	}
	// fd: shares memory as a POSIX file descriptor (--sharing fd); fabric: as a fabric handle.
	writeTable(w, []string{"GPU", "name", "bus id", "SMs", "MHz", "cc", "GiB", "unified", "fd", "fabric", "kernels"}, "lllrrrrllll", rows)
	for _, d := range sys.Devices {
		if d.PTXReason != "" {
			fmt.Fprintf(w, "GPU %d: PTX, compiled by the driver the first time each kind of operation runs: %s\n", d.Ordinal, d.PTXReason)
		}
	}

	fmt.Fprintln(w, "\npeer access (row can access column):")
	head := []string{""}
	align := "l"
	for i := range sys.Devices {
		head = append(head, strconv.Itoa(i))
		align += "r"
	}
	rows = rows[:0]
	for i, line := range sys.PeerAccess {
		row := []string{strconv.Itoa(i)}
		for j, ok := range line {
			if i == j {
				row = append(row, "-")
			} else {
				row = append(row, yesNo(ok))
			}
		}
		rows = append(rows, row)
	}
	writeTable(w, head, align, rows)

	fmt.Fprintf(w, "\nkernels: PTX and machine code from nvcc %s, gen/kernels sha256 %s\n", ptx.NVCCVersion, ptx.SourceHash[:12])
	rows = rows[:0]
	for _, f := range ptx.Files() {
		rows = append(rows, []string{f.Name, fmt.Sprintf("%d-byte", f.ElemBytes), f.ISA, f.Target, strconv.Itoa(len(f.Entries)), strings.Join(cubinArchs(f), " ")})
	}
	writeTable(w, []string{"file", "elements", "ISA", "target", "entries", "machine code"}, "llllrl", rows)
}

// kernelsOf is the GPU table's kernels column: the machine code's
// architecture, "PTX" where the driver compiles the PTX, and a "+PTX"
// where only some of the kernels take PTX.
func kernelsOf(d a2a.DeviceInfo) string {
	switch {
	case d.MachineCode == "":
		return "PTX"
	case d.PTXReason != "":
		return d.MachineCode + "+PTX"
	}
	return d.MachineCode
}

// cubinArchs lists the architectures f has machine code for.
func cubinArchs(f ptx.File) []string {
	var a []string
	for _, c := range ptx.Cubins() {
		if c.PTX == f.Name {
			a = append(a, c.Arch)
		}
	}
	return a
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

type infoReport struct {
	Driver        string        `json:"driver"`
	DriverVersion int           `json:"driver_version"`
	Library       string        `json:"library"`
	GPUs          []gpuReport   `json:"gpus"`
	PeerAccess    [][]bool      `json:"peer_access"`
	NVCC          string        `json:"nvcc"`
	SourceHash    string        `json:"source_hash"`
	PTX           []ptxFileInfo `json:"ptx"`
}

type gpuReport struct {
	Ordinal     int     `json:"ordinal"`
	Name        string  `json:"name"`
	BusID       string  `json:"bus_id"`
	SMs         int     `json:"sms"`
	ClockMHz    int     `json:"clock_mhz"`
	Compute     string  `json:"compute_capability"`
	MemoryGiB   float64 `json:"memory_gib"`
	MemoryBytes uint64  `json:"memory_bytes"`
	Unified     bool    `json:"unified_addressing"`
	MachineCode string  `json:"machine_code"`         // "" where the driver compiles the PTX
	PTXReason   string  `json:"ptx_reason,omitempty"` // why PTX
	PosixFD     bool    `json:"posix_fd_handles"`     // can share memory as a POSIX file descriptor (Config.Sharing fd)
	Fabric      bool    `json:"fabric_handles"`       // can share memory as a fabric handle
}

type ptxFileInfo struct {
	Name      string   `json:"name"`
	ElemBytes int      `json:"elem_bytes"`
	ISA       string   `json:"isa"`
	Target    string   `json:"target"`
	Entries   int      `json:"entries"`
	Cubins    []string `json:"machine_code"` // the architectures it has machine code for
}

func newInfoReport(sys a2a.SystemInfo) infoReport {
	r := infoReport{
		Driver: driverVersion(sys.DriverVersion), DriverVersion: sys.DriverVersion, Library: sys.Library,
		PeerAccess: sys.PeerAccess, NVCC: ptx.NVCCVersion, SourceHash: ptx.SourceHash,
	}
	for _, d := range sys.Devices {
		r.GPUs = append(r.GPUs, gpuReport{
			Ordinal: d.Ordinal, Name: d.Name, BusID: d.BusID, SMs: d.SMs, ClockMHz: d.ClockKHz / 1000,
			Compute: fmt.Sprintf("%d.%d", d.Major, d.Minor), MemoryGiB: float64(d.TotalMemory) / (1 << 30),
			MemoryBytes: d.TotalMemory, Unified: d.Unified, MachineCode: d.MachineCode, PTXReason: d.PTXReason,
			PosixFD: d.PosixFD, Fabric: d.Fabric,
		})
	}
	for _, f := range ptx.Files() {
		r.PTX = append(r.PTX, ptxFileInfo{Name: f.Name, ElemBytes: f.ElemBytes, ISA: f.ISA, Target: f.Target, Entries: len(f.Entries), Cubins: cubinArchs(f)})
	}
	return r
}
