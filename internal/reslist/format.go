package reslist

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// String prints rl as name=value pairs sorted by name and joined by
// commas, the form of kube-apiserver's "exceeded quota" message.
func String(rl corev1.ResourceList) string {
	names := make([]string, 0, len(rl))
	for n := range rl {
		names = append(names, string(n))
	}
	slices.Sort(names)
	for i, n := range names {
		q := rl[corev1.ResourceName(n)]
		names[i] = n + "=" + q.String()
	}
	return strings.Join(names, ",")
}
