module aiinfra.k3s/lab/pause

go 1.26
