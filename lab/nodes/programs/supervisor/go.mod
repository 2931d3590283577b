module aiinfra.k3s/lab/supervisor

go 1.26
