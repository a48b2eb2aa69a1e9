package chartgen_test

import (
	"fmt"

	"github.com/quotakit/quotakit/kube/charts/chartgen"
)

// The caller-trust component a user writes into
// kube/deploy/webhook/caller-trust, for the trust the chart calls
// network-policy.
func ExampleTrustComponent() {
	for component, value := range chartgen.Trusts {
		if value == "network-policy" {
			fmt.Print(chartgen.TrustComponent(component, ""))
		}
	}
	// Output:
	// apiVersion: kustomize.config.k8s.io/v1alpha1
	// kind: Component
	// components:
	// - ../../components/trust-control-plane-network
}

func ExampleID() {
	fmt.Println(chartgen.ID(chartgen.Object{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "quotakit-webhook", "namespace": "quotakit-system"},
	}))
	fmt.Println(chartgen.ID(chartgen.Object{
		"apiVersion": "v1", "kind": "ServiceAccount",
		"metadata": map[string]any{"name": "quotakit-controller", "namespace": "quotakit-system"},
	}))
	// Output:
	// apps/Deployment quotakit-system/quotakit-webhook
	// /ServiceAccount quotakit-system/quotakit-controller
}

// Render builds a kustomization of the tree as `kubectl apply -k` does:
// here the controller alone.
func ExampleRender() {
	objs, err := chartgen.Render("../../deploy", chartgen.Build{Dir: "default"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range objs {
		if o["kind"] == "Deployment" {
			fmt.Println(chartgen.ID(o))
		}
	}
	// Output:
	// apps/Deployment quotakit-system/quotakit-controller
}
