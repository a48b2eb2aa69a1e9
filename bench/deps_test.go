package bench

import (
	_ "k8s.io/apiserver/pkg/quota/v1"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/client-go/util/workqueue"
	_ "k8s.io/kubernetes/pkg/quota/v1/evaluator/core"
)
