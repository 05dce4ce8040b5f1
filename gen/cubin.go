package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// cubinArchs are the GPUs each PTX file is assembled for, as machine code
// the driver loads without compiling: sm_90 (H100, H200) and sm_80 (A100;
// its code also runs on sm_86 and sm_89). A file whose .target is newer
// than an arch (the wire's, sm_90) is assembled for the newer archs only.
var cubinArchs = []string{"sm_90", "sm_80"}

// cubinJob is one ptxas run: a PTX file assembled for arch, and what came
// out.
type cubinJob struct {
	ptx, arch, ptxSHA256 string
	sha256               string // of the cubin
	bytes                int
}

// name is the compressed cubin's file name in the ptx package.
func (j cubinJob) name() string {
	return strings.TrimSuffix(j.ptx, ".ptx") + "." + j.arch + ".cubin.gz"
}

// cubinJobs are the cubins of f (whose text is text).
func cubinJobs(f described, text []byte) []cubinJob {
	var js []cubinJob
	sum := sha256Hex(text)
	for _, arch := range cubinArchs {
		if archNumber(arch, "sm_") >= archNumber(f.target, "sm_") {
			js = append(js, cubinJob{ptx: f.name, arch: arch, ptxSHA256: sum})
		}
	}
	return js
}

// assembleAll runs every job's ptxas on its PTX file in plain (as many at
// once as there are CPUs), writes the compressed cubins into out, fills in
// the jobs' results, and removes the compressed cubins of out that no job
// made.
func assembleAll(ptxas, out, plain string, jobs []cubinJob) error {
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, runtime.NumCPU())
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = assemble(ptxas, out, plain, &jobs[i])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	made := map[string]bool{}
	for _, j := range jobs {
		made[j.name()] = true
	}
	old, err := filepath.Glob(filepath.Join(out, "*.cubin.gz"))
	if err != nil {
		return err
	}
	for _, p := range old {
		if !made[filepath.Base(p)] {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// assemble runs ptxas for j on its PTX file in plain and writes the
// compressed cubin into out.
func assemble(ptxas, out, plain string, j *cubinJob) error {
	tmp := filepath.Join(plain, j.name()+".tmp")
	defer os.Remove(tmp)
	cmd := exec.Command(ptxas, "-arch="+j.arch, "-O3", "-o", tmp, filepath.Join(plain, j.ptx))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	bin, err := os.ReadFile(tmp)
	if err != nil {
		return err
	}
	j.sha256, j.bytes = sha256Hex(bin), len(bin)
	return writeGzip(filepath.Join(out, j.name()), bin)
}

// findPTXAS finds the ptxas of nvcc's release: $PTXAS, the one beside
// nvcc, or the one on PATH.
func findPTXAS(nvcc, nvccVersion string) (string, error) {
	p := os.Getenv("PTXAS")
	if p == "" {
		if real, err := filepath.EvalSymlinks(nvcc); err == nil {
			if beside := filepath.Join(filepath.Dir(real), "ptxas"); isFile(beside) {
				p = beside
			}
		}
	}
	if p == "" {
		var err error
		if p, err = exec.LookPath("ptxas"); err != nil {
			return "", errors.New("ptxas not found (set $PTXAS or put the ptxas of nvcc's release on PATH)")
		}
	}
	v, err := release(p)
	if err != nil {
		return "", err
	}
	if v != nvccVersion {
		return "", fmt.Errorf("%s is release %s, nvcc %s: the cubins must come from the nvcc's own ptxas", p, v, nvccVersion)
	}
	return p, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
