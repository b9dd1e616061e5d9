package container

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseCgroupFixtures(t *testing.T) {
	const (
		dockerCgroupfs = "4f797c539e6c"
		dockerSystemd  = "9ec39b91f3d7"
		k8sContainer   = "34dc0b5e626f"
		k8sPod         = "74c13223-5a00-11e9-b385-42010a80018d"
		podman         = "8a7e7b4c1c3a"
	)
	want := map[string]Ref{
		"docker-cgroupfs-v1.cgroup":        {ID: dockerCgroupfs},
		"docker-cgroupfs-v2.cgroup":        {ID: dockerCgroupfs},
		"docker-systemd-v1.cgroup":         {ID: dockerSystemd},
		"docker-systemd-v2.cgroup":         {ID: dockerSystemd},
		"k8s-cgroupfs-v1.cgroup":           {ID: k8sContainer, PodUID: k8sPod},
		"k8s-containerd-systemd-v2.cgroup": {ID: k8sContainer, PodUID: k8sPod},
		"k8s-crio-guaranteed-v2.cgroup":    {ID: k8sContainer, PodUID: k8sPod},
		"podman-rootful-v2.cgroup":         {ID: podman},
		"podman-rootless-v2.cgroup":        {ID: podman},
		"podman-conmon-v2.cgroup":          {},
		"host-session-v2.cgroup":           {},
		"host-service-v2.cgroup":           {},
		"host-hybrid.cgroup":               {},
	}
	files, err := filepath.Glob(filepath.Join("testdata", "cgroup", "*.cgroup"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(want) {
		t.Errorf("%d fixtures, %d expectations: every fixture needs one", len(files), len(want))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expectation", name)
			continue
		}
		if got := ParseCgroup(data); got != w {
			t.Errorf("%s: got %+v, want %+v", name, got, w)
		}
	}
}

func TestParseCgroupOddContent(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, data string
		want       Ref
	}{
		{"empty", "", Ref{}},
		{"no colons", "garbage\n", Ref{}},
		{"uppercase hex is no ID", "0::/docker/" + strings.ToUpper(id) + "\n", Ref{}},
		{"63 hex digits", "0::/docker/" + id[:63] + "\n", Ref{}},
		{"65 hex digits", "0::/docker/" + id + "a\n", Ref{}},
		{"no trailing newline", "0::/docker/" + id, Ref{ID: id[:12]}},
		{"v2 wins over v1", "4:memory:/docker/" + strings.Repeat("cd", 32) + "\n0::/docker/" + id + "\n", Ref{ID: id[:12]}},
		{"v1 when v2 is the host's", "4:memory:/docker/" + id + "\n0::/\n", Ref{ID: id[:12]}},
		{"pod slice without container", "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod74c13223_5a00_11e9_b385_42010a80018d.slice\n",
			Ref{PodUID: "74c13223-5a00-11e9-b385-42010a80018d"}},
		{"not a kubepods slice", "0::/user.slice/foo-pod74c13223_5a00_11e9_b385_42010a80018d.slice\n", Ref{}},
		{"line over PATH_MAX", "0::/" + strings.Repeat("x/", 3000) + "docker-" + id + ".scope\n", Ref{}},
	} {
		if got := ParseCgroup([]byte(tc.data)); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// FuzzParseCgroup: any content gives a Ref whose fields are, when set, a
// 12-hex ID and a canonical UUID: nothing else of a path can reach a label.
func FuzzParseCgroup(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "cgroup", "*.cgroup"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("0::/kubepods/pod/\x00\n::\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ref := ParseCgroup(data)
		if ref.ID != "" && (len(ref.ID) != ShortIDLength || !isHex(ref.ID)) {
			t.Errorf("ID %q is not 12 hex digits", ref.ID)
		}
		if ref.PodUID != "" && !isUUID(ref.PodUID) {
			t.Errorf("pod UID %q is not a UUID", ref.PodUID)
		}
		if !utf8.ValidString(ref.ID + ref.PodUID) {
			t.Errorf("invalid UTF-8 in %+v", ref)
		}
	})
}
