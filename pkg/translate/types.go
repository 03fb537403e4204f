package translate

import "k8s.io/apimachinery/pkg/types"

func typesUID(s string) types.UID { return types.UID(s) }
