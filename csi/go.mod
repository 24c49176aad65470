module github.com/kubeprov/external-storage/csi

go 1.26
