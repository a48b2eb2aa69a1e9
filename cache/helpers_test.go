package cache_test

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// pod returns a pod with the given namespace, name and resourceVersion.
func pod(namespace, name, rv string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: rv}}
}

// labeledPod returns a pod with labels.
func labeledPod(namespace, name string, labels map[string]string) *corev1.Pod {
	p := pod(namespace, name, "1")
	p.Labels = labels
	return p
}
