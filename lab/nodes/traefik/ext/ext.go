// Package ext stands in for github.com/traefik/traefik/dynamic/ext, a nested module of Traefik that its go.mod
// replaces with a directory the module zip leaves out and the Go proxy does not serve. Upstream it holds only
// these empty extension points of the dynamic configuration (no field, no behaviour), so this copy changes
// nothing Traefik does.
package ext

// HTTP extends dynamic.HTTP (empty upstream).
type HTTP struct{}

// Router extends dynamic.Router (empty upstream).
type Router struct{}

// RouterIng extends the ingress provider's router (empty upstream).
type RouterIng struct{}

// ToRouter returns the Router extension of a RouterIng.
func (RouterIng) ToRouter() Router { return Router{} }
