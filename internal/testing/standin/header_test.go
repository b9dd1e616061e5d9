package standin

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const snippet = `
#ifndef NVML_NO_UNVERSIONED_FUNC_DEFS
    #define nvmlInit nvmlInit_v2
#endif
/** Mentions DECLDIR in a comment: nvmlReturn_t DECLDIR nvmlFake(void); */
typedef struct { unsigned int a; } nvmlThing_t;
nvmlReturn_t DECLDIR nvmlInit_v2(void);
// nvmlReturn_t DECLDIR nvmlCommentedOut(void);
const DECLDIR char* nvmlErrorString(nvmlReturn_t result);
DEPRECATED(13.0) nvmlReturn_t DECLDIR nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp);
nvmlReturn_t  DECLDIR nvmlDevicePowerSmoothingSetState(nvmlDevice_t device,
                                                       nvmlPowerSmoothingState_t *state);
#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS
nvmlReturn_t DECLDIR nvmlInit(void);
nvmlReturn_t DECLDIR nvmlInit_v2(void);
#endif
`

func TestParseHeader(t *testing.T) {
	decls, err := ParseHeader([]byte(snippet))
	if err != nil {
		t.Fatal(err)
	}
	want := []Decl{
		{"nvmlInit_v2", "nvmlReturn_t", "void"},
		{"nvmlErrorString", "const char*", "nvmlReturn_t result"},
		{"nvmlDeviceGetTemperature", "nvmlReturn_t", "nvmlDevice_t device, nvmlTemperatureSensors_t sensorType, unsigned int *temp"},
		{"nvmlDevicePowerSmoothingSetState", "nvmlReturn_t", "nvmlDevice_t device, nvmlPowerSmoothingState_t *state"},
		{"nvmlInit", "nvmlReturn_t", "void"},
	}
	if len(decls) != len(want) {
		t.Fatalf("got %d declarations %v, want %d", len(decls), decls, len(want))
	}
	for i := range want {
		if decls[i] != want[i] {
			t.Errorf("declaration %d = %+v, want %+v", i, decls[i], want[i])
		}
	}

	stubs := string(Stubs(decls))
	for _, line := range []string{
		"__attribute__((weak)) nvmlReturn_t nvmlInit_v2(void) { return NVML_ERROR_NOT_SUPPORTED; }",
		`__attribute__((weak)) const char* nvmlErrorString(nvmlReturn_t result) { return "Not Supported"; }`,
	} {
		if !strings.Contains(stubs, line) {
			t.Errorf("stubs lack %q:\n%s", line, stubs)
		}
	}
}

func TestParseHeaderRefuses(t *testing.T) {
	for name, src := range map[string]string{
		"nothing declared":     "typedef int nvmlReturn_t;",
		"unknown return type":  "unsigned int DECLDIR nvmlCount(void);",
		"differing duplicates": "nvmlReturn_t DECLDIR nvmlX(int a);\nnvmlReturn_t DECLDIR nvmlX(long a);",
		"not a declaration":    "DECLDIR;",
	} {
		if _, err := ParseHeader([]byte(src)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The built library defines every function go-nvml's header declares, and
// the hand-written GB10 functions override the generated stubs.
func TestLibraryDefinesEveryDeclaration(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil && os.Getenv("CC") == "" {
		t.Skip("no C compiler")
	}
	lib, err := Build(".", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nvmlDir, err := goList(".", "-m", "-f", "{{.Dir}}", nvmlModule)
	if err != nil {
		t.Fatal(err)
	}
	header, err := os.ReadFile(filepath.Join(nvmlDir, "pkg", "nvml", "nvml.h"))
	if err != nil {
		t.Fatal(err)
	}
	decls, err := ParseHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	if len(decls) < 400 {
		t.Fatalf("only %d declarations read from nvml.h; the parser is missing some", len(decls))
	}

	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	binding := map[string]elf.SymBind{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			binding[s.Name] = elf.ST_BIND(s.Info)
		}
	}
	for _, d := range decls {
		if _, ok := binding[d.Name]; !ok {
			t.Errorf("%s is declared in nvml.h but not defined", d.Name)
		}
	}
	for _, name := range []string{
		"nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetTemperature", "nvmlDeviceGetTemperatureV",
		"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetClockInfo",
		"nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetUtilizationRates",
		"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetComputeRunningProcesses_v3",
		"nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
	} {
		if binding[name] != elf.STB_GLOBAL {
			t.Errorf("%s is %v, want the hand-written (global, not weak) definition", name, binding[name])
		}
	}
	for _, name := range []string{"nvmlDeviceGetBAR1MemoryInfo", "nvmlDeviceGetFanSpeed"} {
		if binding[name] != elf.STB_WEAK {
			t.Errorf("%s is %v, want the NOT_SUPPORTED stub", name, binding[name])
		}
	}
}
