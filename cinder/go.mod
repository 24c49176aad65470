module github.com/kubeprov/external-storage/cinder

go 1.26
