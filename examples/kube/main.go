// Command kube runs quotakit's ResourceQuota controller against a real
// cluster through client-go, by way of [kubeadapter.Client]. It keeps the
// status of every ResourceQuota of the cluster until SIGINT or SIGTERM.
//
// Usage:
//
//	go run . [-kubeconfig path] [-count resource.version.group]...
//
// The kubeconfig defaults to $KUBECONFIG, then ~/.kube/config, then the
// in-cluster configuration of a pod's service account.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotakit/quotakit"
	"github.com/quotakit/quotakit/examples/kube/kubeadapter"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path of the kubeconfig; defaults to $KUBECONFIG, then ~/.kube/config, then the in-cluster config")
	var counted countFlag
	flag.Var(&counted, "count", "a further resource to charge as count/<resource>.<group>, written resource.version.group (widgets.v1.example.com); may be repeated")
	flag.Parse()

	log := logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(logr.NewContext(ctx, log), *kubeconfig, counted)
	stop()
	if err != nil {
		log.Error(err, "exiting")
		os.Exit(1)
	}
}

// run builds the clients, then runs the controller until ctx is done.
func run(ctx context.Context, kubeconfig string, counted countFlag) error {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return fmt.Errorf("kube: load client config: %w", err)
	}
	cfg = rest.AddUserAgent(cfg, "quotakit-example")
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube: clientset: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube: dynamic client: %w", err)
	}

	// Resources outside core/v1 reach the controller as unstructured
	// objects, so their Object is left nil.
	var opts quotakit.Options
	for _, gvr := range counted {
		opts.Resources = append(opts.Resources, quotakit.Resource{Resource: gvr})
	}
	ctrl, err := quotakit.NewController(kubeadapter.New(clientset, dyn), opts)
	if err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	if err := ctrl.Run(ctx); err != nil {
		return fmt.Errorf("kube: %w", err)
	}
	return nil
}

// countFlag is the value of the repeatable -count flag.
type countFlag []schema.GroupVersionResource

// String returns the resources as given on the command line.
func (f *countFlag) String() string {
	var s []string
	for _, gvr := range *f {
		s = append(s, gvr.Resource+"."+gvr.Version+"."+gvr.Group)
	}
	return strings.Join(s, ",")
}

// Set adds one resource written resource.version.group. The group is
// required: core/v1 resources are counted already.
func (f *countFlag) Set(v string) error {
	gvr, _ := schema.ParseResourceArg(v)
	if gvr == nil || gvr.Resource == "" || gvr.Version == "" || gvr.Group == "" {
		return errors.New("want resource.version.group, for example widgets.v1.example.com")
	}
	*f = append(*f, *gvr)
	return nil
}
