package chartgen

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// A Build is one kustomize rendering of kube/deploy: a kustomization of
// the tree, with the components and caller trust a user's overlay adds.
type Build struct {
	// Dir is the kustomization under kube/deploy, such as "default" or
	// "webhook/configuration".
	Dir string
	// Components are directories under kube/deploy/components that an
	// overlay adds to Dir, in this order.
	Components []string
	// CallerTrust is the webhook's caller-trust component, which the user
	// writes into kube/deploy/webhook/caller-trust: the whole
	// kustomization.yaml. Empty for a Dir that does not need one.
	CallerTrust string
	// CA is the content of Dir/ca.crt, which the user writes for
	// webhook/configuration; nil when Dir needs none.
	CA []byte
}

// TrustComponent returns the caller-trust component that names the
// component kube/deploy/components/trust, as the webhook's
// kustomization.yaml tells a user to write it; patches are appended
// verbatim (a kustomize patches: list, or empty).
func TrustComponent(trust, patches string) string {
	return "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncomponents:\n- ../../components/" +
		trust + "\n" + patches
}

// Object is a Kubernetes object as decoded from YAML.
type Object = map[string]any

// Render builds b from the tree at deployDir with kustomize's library, as
// `kubectl apply -k` does, and returns its objects in kustomize's order.
// It writes what a user writes (the caller-trust component, ca.crt, an
// overlay) into a copy of the tree in a temporary directory, never into
// deployDir, and removes the copy before it returns.
func Render(deployDir string, b Build) ([]Object, error) {
	tmp, err := os.MkdirTemp("", "quotakit-chartgen-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	deploy := filepath.Join(tmp, "deploy")
	if err := copyTree(deployDir, deploy); err != nil {
		return nil, fmt.Errorf("chartgen: copy %s: %w", deployDir, err)
	}
	if b.CallerTrust != "" {
		dir := filepath.Join(deploy, "webhook", "caller-trust")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(b.CallerTrust), 0o644); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(deploy, filepath.FromSlash(b.Dir))
	if b.CA != nil {
		if err := os.WriteFile(filepath.Join(dir, "ca.crt"), b.CA, 0o644); err != nil {
			return nil, err
		}
	}
	if len(b.Components) > 0 {
		// An overlay beside the tree, as a user's own kustomization.
		dir = filepath.Join(tmp, "overlay")
		k := "resources:\n- ../deploy/" + b.Dir + "\ncomponents:\n"
		for _, c := range b.Components {
			k += "- ../deploy/components/" + c + "\n"
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			return nil, err
		}
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("chartgen: kustomize build %s %v: %w", b.Dir, b.Components, err)
	}
	var objs []Object
	for _, r := range m.Resources() {
		o, err := r.Map()
		if err != nil {
			return nil, fmt.Errorf("chartgen: kustomize build %s: %w", b.Dir, err)
		}
		objs = append(objs, o)
	}
	return objs, nil
}

// copyTree copies the regular files under from to to, skipping what a
// user wrote into the tree (git ignores it; the builds write their own).
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		slash := filepath.ToSlash(rel)
		if slash == "webhook/caller-trust" || strings.HasSuffix(slash, "/ca.crt") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
}

// ID names an object as Helm and kubectl tell objects apart: group,
// kind, namespace and name.
func ID(o Object) string {
	api, _ := o["apiVersion"].(string)
	group := ""
	if i := strings.LastIndex(api, "/"); i >= 0 {
		group = api[:i]
	}
	kind, _ := o["kind"].(string)
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	return fmt.Sprintf("%s/%s %s/%s", group, kind, ns, name)
}
