// Command gen writes the two ends of the control protocol from its one
// description, the Go types of a message: the Go encoder and decoder
// (internal/control/wire_gen.go) and the C init's decoder and encoder
// (internal/programs/init/wire.h). go generate runs it in internal/control;
// its test fails when a committed file differs from what it writes.
//
// The description is read from the types' source (go/parser, not
// reflection, so a stale generated file never stops its own regeneration):
// control.Message and every struct type it reaches, in config and
// seccomp/filter. Fields are encoded in declaration order:
//
//	bool                 one byte, 0 or 1; anything else is refused
//	uint16/32/64         unsigned varint, at most the type's maximum
//	int, int64           zigzag varint; an int is within int32 unless tagged
//	string               length, then bytes; never a NUL byte
//	[]byte               a presence byte, then length and bytes (nil stays nil)
//	struct               its fields
//	*struct              a presence byte, then its fields
//	[]T                  a count, then the elements
//
// A field's tag `wire:"..."` narrows it: min=N and max=N bound an integer
// (of a list: each element), c=NAME names the C field. A count or length
// larger than what is left of the message (at the least size of its
// elements) is refused before anything is allocated.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
)

// Facts of the protocol that are not a type's fields.
const (
	// wireVersion starts every body; a peer of another build is refused.
	wireVersion = 1
	// maxFiles bounds the descriptors one message may carry: a spawn
	// passes an init's stdio, control socket, cgroup directory and the
	// plan's files.
	maxFiles = 64
	// maxMessage bounds one body, so a confused peer cannot make the
	// other side allocate without limit.
	maxMessage = 64 << 20
)

// sources are the files holding the protocol's types, by package name,
// relative to internal/control.
var sources = map[string]string{
	"control": "control_linux.go",
	"config":  "../config/config.go",
	"filter":  "../../seccomp/filter/filter_linux.go",
}

// cNames are the C names of the records (struct tags in wire.h).
var cNames = map[string]string{
	"control.Message": "wire_message",
	"control.Spawn":   "spawn_request",
	"control.IDMap":   "id_map",
	"config.Init":     "config",
	"config.Rootfs":   "rootfs",
	"config.Layer":    "layer",
	"config.Mount":    "mount_spec",
	"config.Process":  "process",
	"config.Limits":   "limits",
	"config.Listener": "listener",
	"config.File":     "file_spec",
	"filter.Filter":   "filter",

	"config.Container":        "container",
	"config.JoinedNamespace":  "joined_namespace",
	"config.ContainerMount":   "container_mount",
	"config.Device":           "container_device",
	"config.Sysctl":           "container_sysctl",
	"config.ContainerProcess": "container_process",
	"config.Rlimit":           "container_rlimit",
	"config.ContainerHook":    "container_hook",
}

// cMacros are names that C libraries define as macros, which no C field
// may have: such a field's name gets a trailing underscore.
var cMacros = map[string]bool{"stdin": true, "stdout": true, "stderr": true, "errno": true}

// The outputs, relative to internal/control.
const (
	goOutput = "wire_gen.go"
	cOutput  = "../programs/init/wire.h"
)

type kind int

const (
	kBool kind = iota
	kUint
	kInt
	kString
	kBytes
	kStruct
	kPtr
	kList
)

type typ struct {
	kind     kind
	goName   string  // as written in package control
	bits     int     // kUint: 16, 32, 64; kInt: 32 (Go int) or 64
	rec      *record // kStruct, kPtr
	elem     *typ    // kList
	min, max int64   // kInt
	umax     uint64  // kUint
}

type field struct {
	goName, cName string
	t             *typ
}

type record struct {
	key    string // package.Name
	goName string // as written in package control
	method string // the Go methods' suffix: putInit, getInit
	cName  string
	fields []field
}

type schema struct {
	root    *record
	records []*record // dependencies first
}

func main() {
	files, err := generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "control/gen:", err)
		os.Exit(1)
	}
	for path, content := range files {
		if err := os.WriteFile(filepath.FromSlash(path), content, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "control/gen:", err)
			os.Exit(1)
		}
	}
}

// generate returns the outputs' contents by their paths relative to dir,
// the directory of package control.
func generate(dir string) (map[string][]byte, error) {
	s, err := load(dir)
	if err != nil {
		return nil, err
	}
	goCode, err := format.Source(goFile(s))
	if err != nil {
		return nil, fmt.Errorf("formatting the Go code: %w", err)
	}
	return map[string][]byte{goOutput: goCode, cOutput: cFile(s)}, nil
}

// load parses the sources and builds the records reachable from Message.
func load(dir string) (*schema, error) {
	structs := map[string]*ast.StructType{}
	fset := token.NewFileSet()
	for pkg, path := range sources {
		f, err := parser.ParseFile(fset, filepath.Join(dir, filepath.FromSlash(path)), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					structs[pkg+"."+ts.Name.Name] = st
				}
			}
		}
	}
	s := &schema{}
	seen := map[string]*record{}
	var build func(key string) (*record, error)
	build = func(key string) (*record, error) {
		if r, ok := seen[key]; ok {
			if r.fields == nil && len(structs[key].Fields.List) > 0 {
				return nil, fmt.Errorf("%s contains itself", key)
			}
			return r, nil
		}
		st, ok := structs[key]
		if !ok {
			return nil, fmt.Errorf("no struct type %s in the sources", key)
		}
		pkg, name, _ := strings.Cut(key, ".")
		r := &record{key: key, goName: name, method: name, cName: cNames[key]}
		if pkg != "control" {
			r.goName = key
		}
		if r.cName == "" {
			return nil, fmt.Errorf("%s has no C name (cNames)", key)
		}
		seen[key] = r
		for _, f := range st.Fields.List {
			if len(f.Names) == 0 {
				return nil, fmt.Errorf("%s: embedded fields are not supported", key)
			}
			var tag reflect.StructTag
			if f.Tag != nil {
				unquoted, err := strconv.Unquote(f.Tag.Value)
				if err != nil {
					return nil, err
				}
				tag = reflect.StructTag(unquoted)
			}
			for _, n := range f.Names {
				t, err := resolve(pkg, f.Type, build)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", key, n.Name, err)
				}
				fl := field{goName: n.Name, cName: snake(n.Name), t: t}
				if cMacros[fl.cName] {
					fl.cName += "_"
				}
				if err := applyTag(&fl, tag.Get("wire")); err != nil {
					return nil, fmt.Errorf("%s.%s: %w", key, n.Name, err)
				}
				if fl.cName != snake(n.Name) && len(f.Names) > 1 && strings.Contains(tag.Get("wire"), "c=") {
					return nil, fmt.Errorf("%s.%s: c=NAME on a line of several fields", key, n.Name)
				}
				r.fields = append(r.fields, fl)
			}
		}
		s.records = append(s.records, r)
		return r, nil
	}
	root, err := build("control.Message")
	if err != nil {
		return nil, err
	}
	s.root = root
	return s, nil
}

func resolve(pkg string, expr ast.Expr, build func(string) (*record, error)) (*typ, error) {
	switch e := expr.(type) {
	case *ast.Ident:
		switch e.Name {
		case "bool":
			return &typ{kind: kBool, goName: "bool"}, nil
		case "string":
			return &typ{kind: kString, goName: "string"}, nil
		case "uint16":
			return &typ{kind: kUint, goName: e.Name, bits: 16, umax: math.MaxUint16}, nil
		case "uint32":
			return &typ{kind: kUint, goName: e.Name, bits: 32, umax: math.MaxUint32}, nil
		case "uint64":
			return &typ{kind: kUint, goName: e.Name, bits: 64, umax: math.MaxUint64}, nil
		case "int":
			return &typ{kind: kInt, goName: e.Name, bits: 32, min: math.MinInt32, max: math.MaxInt32}, nil
		case "int64":
			return &typ{kind: kInt, goName: e.Name, bits: 64, min: math.MinInt64, max: math.MaxInt64}, nil
		}
		r, err := build(pkg + "." + e.Name)
		if err != nil {
			return nil, err
		}
		return &typ{kind: kStruct, goName: r.goName, rec: r}, nil
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("unsupported type %T", e.X)
		}
		r, err := build(x.Name + "." + e.Sel.Name)
		if err != nil {
			return nil, err
		}
		return &typ{kind: kStruct, goName: r.goName, rec: r}, nil
	case *ast.StarExpr:
		t, err := resolve(pkg, e.X, build)
		if err != nil {
			return nil, err
		}
		if t.kind != kStruct {
			return nil, fmt.Errorf("a pointer to %s: only pointers to structs are supported", t.goName)
		}
		return &typ{kind: kPtr, goName: "*" + t.goName, rec: t.rec}, nil
	case *ast.ArrayType:
		if e.Len != nil {
			return nil, fmt.Errorf("arrays are not supported")
		}
		if id, ok := e.Elt.(*ast.Ident); ok && id.Name == "byte" {
			return &typ{kind: kBytes, goName: "[]byte"}, nil
		}
		elem, err := resolve(pkg, e.Elt, build)
		if err != nil {
			return nil, err
		}
		if elem.kind == kList || elem.kind == kBytes || elem.kind == kPtr {
			return nil, fmt.Errorf("lists of %s are not supported", elem.goName)
		}
		return &typ{kind: kList, goName: "[]" + elem.goName, elem: elem}, nil
	}
	return nil, fmt.Errorf("unsupported type %T", expr)
}

// applyTag narrows f by its wire tag.
func applyTag(f *field, tag string) error {
	if tag == "" {
		return nil
	}
	num := f.t
	if num.kind == kList {
		num = num.elem
	}
	for _, part := range strings.Split(tag, ",") {
		key, value, _ := strings.Cut(part, "=")
		switch key {
		case "c":
			f.cName = value
		case "min", "max":
			switch num.kind {
			case kInt:
				v, err := strconv.ParseInt(value, 10, 64)
				if err != nil {
					return err
				}
				if key == "min" {
					num.min = v
				} else {
					num.max = v
				}
			case kUint:
				v, err := strconv.ParseUint(value, 10, 64)
				if err != nil || key == "min" {
					return fmt.Errorf("an unsigned field takes only max=N")
				}
				if v > num.umax {
					return fmt.Errorf("max=%d is beyond %s", v, num.goName)
				}
				num.umax = v
			default:
				return fmt.Errorf("%s=%s on a %s", key, value, num.goName)
			}
		default:
			return fmt.Errorf("unknown wire tag %q", part)
		}
	}
	if num.kind == kInt && (num.min > num.max || (num.bits == 32 && (num.min < math.MinInt32 || num.max > math.MaxUint32))) {
		return fmt.Errorf("bounds %d..%d do not fit", num.min, num.max)
	}
	return nil
}

// snake turns a Go name into a C one: SourceIsDir, source_is_dir; UIDMap,
// uid_map.
func snake(name string) string {
	var b strings.Builder
	runes := []rune(name)
	for i, r := range runes {
		upper := r >= 'A' && r <= 'Z'
		if upper && i > 0 {
			prevLower := runes[i-1] >= 'a' && runes[i-1] <= 'z' || runes[i-1] >= '0' && runes[i-1] <= '9'
			nextLower := i+1 < len(runes) && runes[i+1] >= 'a' && runes[i+1] <= 'z'
			if prevLower || (runes[i-1] >= 'A' && runes[i-1] <= 'Z' && nextLower) {
				b.WriteByte('_')
			}
		}
		if upper {
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// minSize is the fewest bytes t takes on the wire.
func minSize(t *typ) int {
	if t.kind == kStruct {
		n := 0
		for _, f := range t.rec.fields {
			n += minSize(f.t)
		}
		return n
	}
	return 1
}

// ---------------------------------------------------------------- Go

func goFile(s *schema) []byte {
	var b bytes.Buffer
	b.WriteString(`// Code generated by internal/control/gen from the protocol's types; DO NOT EDIT.

package control

import (
	"github.com/jail-sandbox/jail/internal/config"
	"github.com/jail-sandbox/jail/seccomp/filter"
)

`)
	fmt.Fprintf(&b, "// wireVersion starts every body; a peer of another build is refused.\nconst wireVersion = %d\n\n", wireVersion)
	fmt.Fprintf(&b, "// MaxFiles bounds the descriptors one message may carry: a spawn passes an\n// init's stdio, control socket, cgroup directory and the plan's files.\nconst MaxFiles = %d\n\n", maxFiles)
	fmt.Fprintf(&b, "// maxMessage bounds one message, so a confused peer cannot make the other\n// side allocate without limit.\nconst maxMessage = %d << 20\n\n", maxMessage>>20)
	for _, r := range s.records {
		fmt.Fprintf(&b, "func (w *writer) put%s(v *%s) {\n", r.method, r.goName)
		for _, f := range r.fields {
			goEncode(&b, f.t, "v."+f.goName)
		}
		b.WriteString("}\n\n")
		fmt.Fprintf(&b, "func (r *reader) get%s(v *%s) {\n", r.method, r.goName)
		for _, f := range r.fields {
			goDecode(&b, f.t, "v."+f.goName)
		}
		b.WriteString("}\n\n")
	}
	return b.Bytes()
}

func goEncode(b *bytes.Buffer, t *typ, e string) {
	switch t.kind {
	case kBool:
		fmt.Fprintf(b, "w.bool(%s)\n", e)
	case kUint:
		fmt.Fprintf(b, "w.uint(uint64(%s))\n", e)
	case kInt:
		fmt.Fprintf(b, "w.int(int64(%s))\n", e)
	case kString:
		fmt.Fprintf(b, "w.string(%s)\n", e)
	case kBytes:
		fmt.Fprintf(b, "w.optionalBytes(%s)\n", e)
	case kStruct:
		fmt.Fprintf(b, "w.put%s(&%s)\n", t.rec.method, e)
	case kPtr:
		fmt.Fprintf(b, "w.bool(%s != nil)\nif %s != nil {\nw.put%s(%s)\n}\n", e, e, t.rec.method, e)
	case kList:
		fmt.Fprintf(b, "w.uint(uint64(len(%s)))\nfor i := range %s {\n", e, e)
		goEncode(b, t.elem, e+"[i]")
		b.WriteString("}\n")
	}
}

func goDecode(b *bytes.Buffer, t *typ, e string) {
	switch t.kind {
	case kBool:
		fmt.Fprintf(b, "%s = r.bool()\n", e)
	case kUint:
		if t.umax == math.MaxUint64 {
			fmt.Fprintf(b, "%s = r.uint()\n", e)
		} else {
			fmt.Fprintf(b, "%s = %s(r.uintAtMost(%d))\n", e, t.goName, t.umax)
		}
	case kInt:
		if t.min == math.MinInt64 && t.max == math.MaxInt64 {
			fmt.Fprintf(b, "%s = r.int()\n", e)
		} else {
			fmt.Fprintf(b, "%s = %s(r.intIn(%d, %d))\n", e, t.goName, t.min, t.max)
		}
	case kString:
		fmt.Fprintf(b, "%s = r.string()\n", e)
	case kBytes:
		fmt.Fprintf(b, "%s = r.optionalBytes()\n", e)
	case kStruct:
		fmt.Fprintf(b, "r.get%s(&%s)\n", t.rec.method, e)
	case kPtr:
		fmt.Fprintf(b, "if r.bool() {\n%s = new(%s)\nr.get%s(%s)\n}\n", e, t.rec.goName, t.rec.method, e)
	case kList:
		fmt.Fprintf(b, "if n := r.count(%d); n > 0 {\n%s = make(%s, n)\nfor i := range %s {\n", minSize(t.elem), e, t.goName, e)
		goDecode(b, t.elem, e+"[i]")
		b.WriteString("}\n}\n")
	}
}

// ---------------------------------------------------------------- C

func cType(t *typ) string {
	switch t.kind {
	case kBool:
		return "bool"
	case kUint:
		return fmt.Sprintf("uint%d_t", t.bits)
	case kInt:
		if t.min >= math.MinInt32 && t.max <= math.MaxInt32 {
			return "int"
		}
		return "int64_t"
	case kString:
		return "char *"
	case kBytes:
		return "struct wire_bytes"
	case kStruct:
		return "struct " + t.rec.cName
	case kPtr:
		return "struct " + t.rec.cName + " *"
	}
	panic("cType of a list")
}

// decl is "TYPE NAME" with C's spacing.
func decl(t *typ, name string) string {
	ct := cType(t)
	if strings.HasSuffix(ct, "*") {
		return ct + name
	}
	return ct + " " + name
}

func cInt(v int64) string {
	switch v {
	case math.MinInt64:
		return "INT64_MIN"
	case math.MaxInt64:
		return "INT64_MAX"
	case math.MinInt32:
		return "INT32_MIN"
	case math.MaxInt32:
		return "INT32_MAX"
	}
	return strconv.FormatInt(v, 10) + "LL"
}

func cFile(s *schema) []byte {
	var b bytes.Buffer
	b.WriteString(cPrelude)
	fmt.Fprintf(&b, "#define WIRE_VERSION %d\n#define WIRE_MAX_FILES %d\n#define WIRE_MAX_MESSAGE (%d << 20)\n\n", wireVersion, maxFiles, maxMessage>>20)
	b.WriteString(cPrimitives)
	b.WriteString("/* The records, as the Go types declare them (field for field, in order). */\n")
	for _, r := range s.records {
		fmt.Fprintf(&b, "\n/* %s */\nstruct %s {\n", r.key, r.cName)
		for _, f := range r.fields {
			if f.t.kind == kList {
				fmt.Fprintf(&b, "\t%s; /* n%s elements, then a zero one */\n\tsize_t n%s;\n", decl(f.t.elem, "*"+f.cName), f.cName, f.cName)
				continue
			}
			fmt.Fprintf(&b, "\t%s;\n", decl(f.t, f.cName))
		}
		b.WriteString("};\n")
	}
	b.WriteString("\n")
	for _, r := range s.records {
		fmt.Fprintf(&b, "static void wire_get_%s(struct wire_reader *r, struct %s *v);\n", r.cName, r.cName)
		fmt.Fprintf(&b, "static void wire_put_%s(struct wire_writer *w, const struct %s *v);\n", r.cName, r.cName)
		fmt.Fprintf(&b, "static void wire_free_%s(struct %s *v);\n", r.cName, r.cName)
	}
	for _, r := range s.records {
		fmt.Fprintf(&b, "\nstatic void wire_get_%s(struct wire_reader *r, struct %s *v)\n{\n", r.cName, r.cName)
		for _, f := range r.fields {
			cDecode(&b, f.t, "v->"+f.cName, "v->n"+f.cName)
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "\nstatic void wire_put_%s(struct wire_writer *w, const struct %s *v)\n{\n", r.cName, r.cName)
		for _, f := range r.fields {
			cEncode(&b, f.t, "v->"+f.cName, "v->n"+f.cName)
		}
		b.WriteString("}\n")
		fmt.Fprintf(&b, "\nstatic void wire_free_%s(struct %s *v)\n{\n\t(void)v;\n", r.cName, r.cName)
		for _, f := range r.fields {
			cFree(&b, f.t, "v->"+f.cName, "v->n"+f.cName)
		}
		b.WriteString("}\n")
	}
	root := s.root.cName
	fmt.Fprintf(&b, cEntryPoints, root, root, root, root, root, root)

	b.WriteString("\n#ifdef WIRE_PRINT\n/* Printing, for the tests only: one line a value, keyed by the Go field's\n * path, strings and bytes in hex. */\n")
	for _, r := range s.records {
		fmt.Fprintf(&b, "static void wire_print_%s(FILE *out, const char *path, const struct %s *v);\n", r.cName, r.cName)
	}
	for _, r := range s.records {
		fmt.Fprintf(&b, "\nstatic void wire_print_%s(FILE *out, const char *path, const struct %s *v)\n{\n\tchar key[WIRE_KEY_MAX];\n", r.cName, r.cName)
		for _, f := range r.fields {
			fmt.Fprintf(&b, "\twire_key(key, sizeof(key), path, \".%s\", -1);\n", f.goName)
			cPrint(&b, f.t, "v->"+f.cName, "v->n"+f.cName, f.goName)
		}
		b.WriteString("}\n")
	}
	fmt.Fprintf(&b, "\nstatic void wire_print(FILE *out, const struct %s *m)\n{\n\twire_print_%s(out, \"m\", m);\n}\n#endif\n\n#endif\n", root, root)
	return b.Bytes()
}

func cDecode(b *bytes.Buffer, t *typ, e, count string) {
	switch t.kind {
	case kBool:
		fmt.Fprintf(b, "\t%s = wire_read_bool(r);\n", e)
	case kUint:
		if t.umax == math.MaxUint64 {
			fmt.Fprintf(b, "\t%s = wire_read_uint(r);\n", e)
		} else {
			fmt.Fprintf(b, "\t%s = (%s)wire_read_uint_at_most(r, %dULL);\n", e, cType(t), t.umax)
		}
	case kInt:
		if t.min == math.MinInt64 && t.max == math.MaxInt64 {
			fmt.Fprintf(b, "\t%s = wire_read_int(r);\n", e)
		} else {
			fmt.Fprintf(b, "\t%s = (%s)wire_read_int_in(r, %s, %s);\n", e, cType(t), cInt(t.min), cInt(t.max))
		}
	case kString:
		fmt.Fprintf(b, "\t%s = wire_read_string(r);\n", e)
	case kBytes:
		fmt.Fprintf(b, "\twire_read_bytes(r, &%s);\n", e)
	case kStruct:
		fmt.Fprintf(b, "\twire_get_%s(r, &%s);\n", t.rec.cName, e)
	case kPtr:
		fmt.Fprintf(b, "\tif (wire_read_bool(r)) {\n\t\t%s = wire_alloc(1, sizeof(*%s));\n\t\twire_get_%s(r, %s);\n\t}\n", e, e, t.rec.cName, e)
	case kList:
		fmt.Fprintf(b, "\t%s = wire_read_count(r, %d);\n\t%s = wire_alloc(%s + 1, sizeof(*%s));\n\tfor (size_t i = 0; i < %s; i++) {\n", count, minSize(t.elem), e, count, e, count)
		var inner bytes.Buffer
		cDecode(&inner, t.elem, e+"[i]", "")
		b.WriteString(indent(inner.String()))
		b.WriteString("\t}\n")
	}
}

func cEncode(b *bytes.Buffer, t *typ, e, count string) {
	switch t.kind {
	case kBool:
		fmt.Fprintf(b, "\twire_put_bool(w, %s);\n", e)
	case kUint:
		fmt.Fprintf(b, "\twire_put_uint(w, %s);\n", e)
	case kInt:
		fmt.Fprintf(b, "\twire_put_int(w, %s);\n", e)
	case kString:
		fmt.Fprintf(b, "\twire_put_string(w, %s);\n", e)
	case kBytes:
		fmt.Fprintf(b, "\twire_put_bytes(w, &%s);\n", e)
	case kStruct:
		fmt.Fprintf(b, "\twire_put_%s(w, &%s);\n", t.rec.cName, e)
	case kPtr:
		fmt.Fprintf(b, "\twire_put_bool(w, %s != NULL);\n\tif (%s != NULL)\n\t\twire_put_%s(w, %s);\n", e, e, t.rec.cName, e)
	case kList:
		fmt.Fprintf(b, "\twire_put_uint(w, %s);\n\tfor (size_t i = 0; i < %s; i++) {\n", count, count)
		var inner bytes.Buffer
		cEncode(&inner, t.elem, e+"[i]", "")
		b.WriteString(indent(inner.String()))
		b.WriteString("\t}\n")
	}
}

func cFree(b *bytes.Buffer, t *typ, e, count string) {
	switch t.kind {
	case kString:
		fmt.Fprintf(b, "\tfree(%s);\n", e)
	case kBytes:
		fmt.Fprintf(b, "\tfree(%s.data);\n", e)
	case kStruct:
		fmt.Fprintf(b, "\twire_free_%s(&%s);\n", t.rec.cName, e)
	case kPtr:
		fmt.Fprintf(b, "\tif (%s != NULL)\n\t\twire_free_%s(%s);\n\tfree(%s);\n", e, t.rec.cName, e, e)
	case kList:
		var inner bytes.Buffer
		cFree(&inner, t.elem, e+"[i]", "")
		if inner.Len() > 0 {
			fmt.Fprintf(b, "\tfor (size_t i = 0; %s != NULL && i < %s; i++) {\n", e, count)
			b.WriteString(indent(inner.String()))
			b.WriteString("\t}\n")
		}
		fmt.Fprintf(b, "\tfree(%s);\n", e)
	}
}

func cPrint(b *bytes.Buffer, t *typ, e, count, goName string) {
	switch t.kind {
	case kBool:
		fmt.Fprintf(b, "\tfprintf(out, \"%%s=%%d\\n\", key, %s ? 1 : 0);\n", e)
	case kUint:
		fmt.Fprintf(b, "\tfprintf(out, \"%%s=%%llu\\n\", key, (unsigned long long)%s);\n", e)
	case kInt:
		fmt.Fprintf(b, "\tfprintf(out, \"%%s=%%lld\\n\", key, (long long)%s);\n", e)
	case kString:
		fmt.Fprintf(b, "\twire_print_hex(out, key, \"s:\", (const unsigned char *)%s, strlen(%s));\n", e, e)
	case kBytes:
		fmt.Fprintf(b, "\tif (%s.present)\n\t\twire_print_hex(out, key, \"b:\", %s.data, %s.len);\n\telse\n\t\tfprintf(out, \"%%s=nil\\n\", key);\n", e, e, e)
	case kStruct:
		fmt.Fprintf(b, "\twire_print_%s(out, key, &%s);\n", t.rec.cName, e)
	case kPtr:
		fmt.Fprintf(b, "\tif (%s != NULL)\n\t\twire_print_%s(out, key, %s);\n\telse\n\t\tfprintf(out, \"%%s=nil\\n\", key);\n", e, t.rec.cName, e)
	case kList:
		fmt.Fprintf(b, "\tfprintf(out, \"%%s.len=%%zu\\n\", key, %s);\n\tfor (size_t i = 0; i < %s; i++) {\n\t\twire_key(key, sizeof(key), path, \".%s\", (long long)i);\n", count, count, goName)
		var inner bytes.Buffer
		cPrint(&inner, t.elem, e+"[i]", "", goName)
		b.WriteString(indent(inner.String()))
		b.WriteString("\t}\n")
	}
}

func indent(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "\t" + l
		}
	}
	return strings.Join(lines, "")
}

const cPrelude = `/* Code generated by internal/control/gen from the protocol's Go types; DO NOT EDIT. */
/*
 * The control protocol's C end (internal/control): the records of a
 * message as C structs, a decoder that refuses anything but one whole,
 * well-formed body, an encoder, and a function that frees what the decoder
 * allocated. The encoding is described in internal/control/gen/main.go.
 *
 * The decoder is bounds-checked throughout: a varint longer than ten bytes
 * or past uint64, an integer outside its field's bounds, a bool that is
 * neither 0 nor 1, a count or length beyond what is left of the body (at
 * the least size of an element), a string holding a NUL byte, and bytes
 * left after the message all make it fail. A failed decode leaves every
 * allocated part reachable, for wire_free_message, and nothing to use.
 * Allocation failure ends the process (_exit(1)).
 */
#ifndef JAIL_WIRE_H
#define JAIL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

`

const cPrimitives = `/* Optional bytes: present or not, as a Go nil slice and an empty one. */
struct wire_bytes {
	bool present;
	unsigned char *data; /* len bytes, allocated when present */
	size_t len;
};

/* wire_reader walks a body; any error empties it and sets bad. */
struct wire_reader {
	const unsigned char *p;
	size_t n;
	bool bad;
};

/* wire_writer builds a body in a growing buffer. */
struct wire_writer {
	unsigned char *buf;
	size_t len, cap;
};

static void *wire_alloc(size_t n, size_t size)
{
	void *p = calloc(n == 0 ? 1 : n, size == 0 ? 1 : size);
	if (p == NULL)
		_exit(1);
	return p;
}

static void wire_fail(struct wire_reader *r)
{
	r->bad = true;
	r->n = 0;
}

static uint64_t wire_read_uint(struct wire_reader *r)
{
	uint64_t v = 0;
	for (size_t i = 0; i < r->n && i < 10; i++) {
		unsigned char c = r->p[i];
		if (i == 9 && c > 1)
			break; /* past uint64 */
		v |= (uint64_t)(c & 0x7f) << (7 * i);
		if ((c & 0x80) == 0) {
			r->p += i + 1;
			r->n -= i + 1;
			return v;
		}
	}
	wire_fail(r);
	return 0;
}

static int64_t wire_read_int(struct wire_reader *r)
{
	uint64_t u = wire_read_uint(r);
	uint64_t half = u >> 1;
	return (u & 1) ? (int64_t)~half : (int64_t)half;
}

static int64_t wire_read_int_in(struct wire_reader *r, int64_t lo, int64_t hi)
{
	int64_t v = wire_read_int(r);
	if (v < lo || v > hi) {
		wire_fail(r);
		return 0;
	}
	return v;
}

static uint64_t wire_read_uint_at_most(struct wire_reader *r, uint64_t max)
{
	uint64_t v = wire_read_uint(r);
	if (v > max) {
		wire_fail(r);
		return 0;
	}
	return v;
}

/* wire_read_count reads a count of elements of at least min bytes each,
 * refusing one the rest of the body cannot hold. */
static size_t wire_read_count(struct wire_reader *r, size_t min)
{
	uint64_t n = wire_read_uint(r);
	if (n > r->n / min) {
		wire_fail(r);
		return 0;
	}
	return (size_t)n;
}

static bool wire_read_bool(struct wire_reader *r)
{
	if (r->n == 0 || r->p[0] > 1) {
		wire_fail(r);
		return false;
	}
	bool b = r->p[0] == 1;
	r->p++;
	r->n--;
	return b;
}

/* wire_read_string returns a NUL-terminated copy; a NUL inside is refused. */
static char *wire_read_string(struct wire_reader *r)
{
	size_t n = wire_read_count(r, 1);
	char *s = wire_alloc(n + 1, 1);
	if (n == 0)
		return s;
	if (memchr(r->p, '\0', n) != NULL) {
		wire_fail(r);
		return s;
	}
	memcpy(s, r->p, n);
	r->p += n;
	r->n -= n;
	return s;
}

static void wire_read_bytes(struct wire_reader *r, struct wire_bytes *b)
{
	b->present = wire_read_bool(r);
	if (!b->present)
		return;
	b->len = wire_read_count(r, 1);
	b->data = wire_alloc(b->len, 1);
	if (b->len == 0)
		return;
	memcpy(b->data, r->p, b->len);
	r->p += b->len;
	r->n -= b->len;
}

static void wire_put_byte(struct wire_writer *w, unsigned char c)
{
	if (w->len == w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 256;
		unsigned char *buf = realloc(w->buf, cap);
		if (buf == NULL)
			_exit(1);
		w->buf = buf;
		w->cap = cap;
	}
	w->buf[w->len++] = c;
}

static void wire_put_uint(struct wire_writer *w, uint64_t v)
{
	while (v >= 0x80) {
		wire_put_byte(w, (unsigned char)(v | 0x80));
		v >>= 7;
	}
	wire_put_byte(w, (unsigned char)v);
}

static void wire_put_int(struct wire_writer *w, int64_t v)
{
	uint64_t u = (uint64_t)v << 1;
	if (v < 0)
		u = ~u;
	wire_put_uint(w, u);
}

static void wire_put_bool(struct wire_writer *w, bool b)
{
	wire_put_byte(w, b ? 1 : 0);
}

static void wire_put_raw(struct wire_writer *w, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		wire_put_byte(w, p[i]);
}

/* wire_put_string writes s; NULL is the empty string. */
static void wire_put_string(struct wire_writer *w, const char *s)
{
	size_t n = s == NULL ? 0 : strlen(s);
	wire_put_uint(w, n);
	wire_put_raw(w, (const unsigned char *)s, n);
}

static void wire_put_bytes(struct wire_writer *w, const struct wire_bytes *b)
{
	wire_put_bool(w, b->present);
	if (b->present) {
		wire_put_uint(w, b->len);
		wire_put_raw(w, b->data, b->len);
	}
}

#ifdef WIRE_PRINT
enum { WIRE_KEY_MAX = 512 };

/* wire_key writes path + name (+ [index] when index >= 0) to key, and ends
 * the program on truncation. */
static void wire_key(char *key, size_t size, const char *path, const char *name, long long index)
{
	int n = index >= 0 ? snprintf(key, size, "%s%s[%lld]", path, name, index) : snprintf(key, size, "%s%s", path, name);
	if (n < 0 || (size_t)n >= size) {
		fprintf(stderr, "wire_key: %s%s: longer than %zu bytes\n", path, name, size - 1);
		exit(2);
	}
}

static void wire_print_hex(FILE *out, const char *key, const char *kind, const unsigned char *p, size_t n)
{
	fprintf(out, "%s=%s", key, kind);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%02x", p[i]);
	fputc('\n', out);
}
#endif

`

// cEntryPoints takes the root record's C name six times.
const cEntryPoints = `
/*
 * wire_decode fills m from body and returns 0, or -1 when body is anything
 * but one whole, well-formed message of this version. Either way m is to be
 * freed with wire_free.
 */
__attribute__((unused)) static int wire_decode(const unsigned char *body, size_t size, struct %s *m)
{
	struct wire_reader r = {body, size, false};
	memset(m, 0, sizeof(*m));
	if (wire_read_uint(&r) != WIRE_VERSION || r.bad)
		return -1;
	wire_get_%s(&r, m);
	return r.bad || r.n != 0 ? -1 : 0;
}

/* wire_encode appends the version and m to w. */
__attribute__((unused)) static void wire_encode(struct wire_writer *w, const struct %s *m)
{
	wire_put_uint(w, WIRE_VERSION);
	wire_put_%s(w, m);
}

/* wire_free frees what wire_decode allocated in m (not m itself). */
__attribute__((unused)) static void wire_free(struct %s *m)
{
	wire_free_%s(m);
	memset(m, 0, sizeof(*m));
}
`
