package device

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// moduleSet is one PTX file's kernels in a share's context: the module of
// its cubin, loaded whole with the share, or one module per family of its
// PTX (ptx.Family), loaded the first time an operation needs one
// (Share.load). Every function of a loaded module is looked up at once:
// where the driver defers loading a function's code to its first lookup
// (CUDA_MODULE_LOADING=LAZY), that lookup waits for the device too.
type moduleSet struct {
	share *Share
	file  ptx.File
	code  Code              // fixed at creation
	index map[ptx.Entry]int // entry -> index into file.Entries
	famOf []int             // entry index -> family index
	fams  []ptx.Family      // family index -> family
	fns   []atomic.Uintptr  // by entry index: the driver.Function, 0 until loaded
	mods  []driver.Module   // loaded; appended under share.loadMu, read by teardown
	cubin ptx.Cubin         // the machine code chosen, when code.Arch is set
}

// newModuleSet prepares f's kernels on s's device, of compute capability
// major.minor, and loads what can be loaded now, when no Comm of the
// process is on the device: the whole cubin where one runs there (falling
// back to PTX, with the reason, if it does not load), else the PTX of the
// families in eager.
func newModuleSet(s *Share, f ptx.File, major, minor int, eager ...ptx.Family) (*moduleSet, error) {
	m := &moduleSet{share: s, file: f, index: map[ptx.Entry]int{}, famOf: make([]int, len(f.Entries)), fns: make([]atomic.Uintptr, len(f.Entries))}
	famIdx := map[ptx.Family]int{}
	for i, fam := range f.Families() {
		famIdx[fam] = i
		m.fams = append(m.fams, fam)
	}
	for i, e := range f.Entries {
		fam, ok := f.FamilyOf(e)
		if !ok {
			return nil, fmt.Errorf("a2a: %s's entry %s is in no family: %w", f.Name, e, api.ErrNotSupported)
		}
		m.index[e], m.famOf[i] = i, famIdx[fam]
	}
	m.code, m.cubin = chooseCode(f, major, minor)
	if m.code.Arch != "" {
		err := m.loadCubin()
		if err == nil {
			return m, nil
		}
		m.code = Code{File: f.Name, Reason: fmt.Sprintf("the %s machine code did not load (%v)", m.code.Arch, err)}
	}
	for _, fam := range eager {
		if err := m.loadFamily(famIdx[fam]); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// loadCubin loads the cubin as one module holding every entry.
func (m *moduleSet) loadCubin() error {
	img, err := m.cubin.Image()
	if err != nil {
		return err
	}
	all := make([]int, len(m.file.Entries))
	for i := range all {
		all[i] = i
	}
	return m.loadImage(img, all)
}

// loadFamily JIT-loads the PTX of family fam (an index into m.fams).
func (m *moduleSet) loadFamily(fam int) error {
	img, err := m.file.FamilyImage(m.fams[fam])
	if err != nil {
		return err
	}
	var entries []int
	for i, f := range m.famOf {
		if f == fam {
			entries = append(entries, i)
		}
	}
	return m.loadImage(img, entries)
}

// loadImage loads img as a module and looks up the entries at the given
// indices, which it must define; on failure nothing stays loaded.
func (m *moduleSet) loadImage(img []byte, entries []int) error {
	ctx := m.share.Ctx
	mod, err := ctx.LoadModule(img)
	if err != nil {
		return api.WrapDriver("loading kernels", err)
	}
	fns := make([]driver.Function, len(entries))
	for k, i := range entries {
		if fns[k], err = ctx.Function(mod, string(m.file.Entries[i])); err != nil {
			return errors.Join(api.WrapDriver("loading kernels", err), wrapUnload(ctx.UnloadModule(mod)))
		}
	}
	for k, i := range entries {
		m.fns[i].Store(uintptr(fns[k]))
	}
	m.mods = append(m.mods, mod)
	return nil
}

func wrapUnload(err error) error {
	if err != nil {
		return api.WrapDriver("unloading kernels", err)
	}
	return nil
}

// entry returns the index of f's entry e.
func (m *moduleSet) entry(e ptx.Entry) (int, error) {
	i, ok := m.index[e]
	if !ok {
		return 0, fmt.Errorf("a2a: %s has no entry %s: %w", m.file.Name, e, api.ErrNotSupported)
	}
	return i, nil
}

// fn is the function of entry i, 0 until its family is loaded.
// Allocation-free.
func (m *moduleSet) fn(i int) driver.Function { return driver.Function(m.fns[i].Load()) }

// ensure loads the family of entry i unless it is loaded (see Share.load):
// a function is stored only once its whole family is. Allocation-free
// once it is.
func (m *moduleSet) ensure(i int, timeout time.Duration) error {
	if m.fns[i].Load() != 0 {
		return nil
	}
	return m.share.load(m, i, timeout)
}

// unload unloads every module of m. Called by the share's teardown only.
func (m *moduleSet) unload() []error {
	var errs []error
	for _, mod := range m.mods {
		if err := m.share.Ctx.UnloadModule(mod); err != nil {
			errs = append(errs, api.WrapDriver("unloading kernels", err))
		}
	}
	m.mods = nil
	return errs
}
