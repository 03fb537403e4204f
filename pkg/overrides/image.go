package overrides

import (
	"strings"

	flotillav1 "github.com/flotilla-dev/flotilla/pkg/apis/v1alpha1"
)

// imageRef is an image reference's parts: [registry/]repository[:tag][@digest].
type imageRef struct {
	registry, repository, tag, digest string
}

// parseImage splits an image reference as container runtimes read it: the first path component
// is a registry when it has a dot or a port, or is localhost; else the registry is Docker Hub's,
// left implicit.
func parseImage(ref string) imageRef {
	var r imageRef
	if i := strings.Index(ref, "@"); i >= 0 {
		ref, r.digest = ref[:i], ref[i+1:]
	}
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i+1:], "/") {
		ref, r.tag = ref[:i], ref[i+1:]
	}
	if i := strings.Index(ref, "/"); i >= 0 {
		first := ref[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			r.registry, ref = first, ref[i+1:]
		}
	}
	r.repository = ref
	return r
}

func (r imageRef) String() string {
	out := r.repository
	if r.registry != "" {
		if r.registry != "docker.io" || strings.Contains(out, "/") {
			out = r.registry + "/" + out
		} else {
			out = r.registry + "/library/" + out
		}
	}
	if r.tag != "" {
		out += ":" + r.tag
	}
	if r.digest != "" {
		out += "@" + r.digest
	}
	return out
}

// rewriteImage applies an ImageOverride to a reference: each part it gives replaces that part; a
// new tag drops the digest (which would pin the old one).
func rewriteImage(ref string, o *flotillav1.ImageOverride) string {
	r := parseImage(ref)
	if o.Registry != "" {
		r.registry = o.Registry
	}
	if o.Repository != "" {
		r.repository = o.Repository
	}
	if o.Tag != "" {
		r.tag, r.digest = o.Tag, ""
	}
	if o.Digest != "" {
		r.digest = o.Digest
	}
	return r.String()
}
