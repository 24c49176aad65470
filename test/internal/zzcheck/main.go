package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/kubeprov/external-storage/test/framework/manifests"
)

func main() {
	objs, err := manifests.Render(os.Args[1])
	if err != nil {
		panic(err)
	}
	for _, o := range objs {
		if o.GetKind() == os.Args[2] {
			b, _ := yaml.Marshal(o.Object)
			fmt.Println(string(b))
		}
	}
}
