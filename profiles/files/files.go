// Package files reads and writes profile files (YAML, see package
// profiles) and resolves a profile onto its parents.
//
// The format is versioned (`version: 1`); unknown fields are errors, and
// every error names the line it is about. Resolving merges a profile onto
// its parents: lists are appended, the child's scalar settings win, a
// child's `capabilities:` replaces its parent's (absent, it keeps the
// parent's), and `drop` removes syscalls the parents allowed. The resolved profile is
// what the seccomp compiler takes and what `jail profile show` prints.
//
// Only programs that read profile files link this package (jail's tools
// program, the generator of the built-ins, tests): yaml.v3's package
// initialisation costs every start of a program that links it.
package files

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/jail-sandbox/jail/internal/egress/rules"
	"github.com/jail-sandbox/jail/profiles"
)

// Parse reads a profile file.
func Parse(name, source string, data []byte) (*profiles.Profile, error) {
	p, _, err := parse(name, source, data)
	return p, err
}

// parse reads a profile file, and where its `extends` is written.
func parse(name, source string, data []byte) (*profiles.Profile, int, error) {
	var p profiles.Profile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, 0, yamlError(name, err)
	}
	p.Name, p.Source = name, source
	p.Seccomp.MarkFrom(name)
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = *root.Content[0]
	}
	if p.Version != profiles.FormatVersion {
		return nil, 0, &profiles.Error{Profile: name, Line: 1, Err: fmt.Errorf("version %d: this jail reads version %d", p.Version, profiles.FormatVersion)}
	}
	if err := recordLines(name, &p.Seccomp, valueOf(&root, "seccomp")); err != nil {
		return nil, 0, err
	}
	extendsLine := lineOf(&root, "extends")
	if p.Extends != "" && !profiles.ValidName(p.Extends) {
		return nil, 0, &profiles.Error{Profile: name, Line: extendsLine, Err: fmt.Errorf("extends %q: not a profile name", p.Extends)}
	}
	if err := checkCapabilities(name, &p, &root); err != nil {
		return nil, 0, err
	}
	if p.Network != "" && p.Network != "none" {
		list, ok := strings.CutPrefix(p.Network, "allow=")
		if !ok {
			return nil, 0, &profiles.Error{Profile: name, Line: lineOf(&root, "network"), Err: fmt.Errorf("network %q: none, or allow=RULE[,RULE...]", p.Network)}
		}
		if _, err := rules.Parse(list); err != nil {
			return nil, 0, &profiles.Error{Profile: name, Line: lineOf(&root, "network"), Err: fmt.Errorf("network: %v", err)}
		}
	}
	for _, list := range []struct {
		key   string
		paths []string
	}{{"masks", p.Masks}, {"read_only", p.ReadOnly}} {
		for _, path := range list.paths {
			if !filepath.IsAbs(path) || strings.Contains(path, "..") {
				return nil, 0, &profiles.Error{Profile: name, Line: lineOf(&root, list.key), Err: fmt.Errorf("path %q must be absolute, without ..", path)}
			}
			if strings.IndexByte(path, 0) >= 0 {
				// The init could not be handed it: refused here
				// rather than once a sandbox has started.
				return nil, 0, &profiles.Error{Profile: name, Line: lineOf(&root, list.key), Err: fmt.Errorf("path %q holds a NUL byte", path)}
			}
		}
	}
	for _, d := range p.Seccomp.Errno {
		if len(d.Syscalls) == 0 {
			return nil, 0, &profiles.Error{Profile: name, Err: errors.New("an errno entry names no syscalls")}
		}
		if d.Errno != "" && profiles.ErrnoValue(d.Errno) == 0 {
			return nil, 0, &profiles.Error{Profile: name, Line: d.Syscalls[0].Line, Err: fmt.Errorf("errno %q is not an errno name (EPERM, ENOSYS, ...)", d.Errno)}
		}
	}
	for _, c := range append(p.Seccomp.AllowIf, conditionalsOf(p.Seccomp.Errno)...) {
		for _, a := range c.Args {
			if a.Index > 5 {
				return nil, 0, &profiles.Error{Profile: name, Line: c.Syscall.Line, Err: fmt.Errorf("%s: argument index %d: syscalls have 6", c.Syscall.Name, a.Index)}
			}
			if a.Not && a.Mask != 0 {
				return nil, 0, &profiles.Error{Profile: name, Line: c.Syscall.Line, Err: fmt.Errorf("%s: `not` compares whole values, without mask", c.Syscall.Name)}
			}
		}
	}
	return &p, extendsLine, nil
}

// checkCapabilities refuses a `capabilities:` that is not a list of
// grantable capabilities (profiles.CheckCapability), naming the line, and
// writes the list in canonical names, each once, in the order of
// profiles.Grantable. `capabilities:` with no
// value is refused rather than read as absent: `[]` says none.
func checkCapabilities(name string, p *profiles.Profile, root *yaml.Node) error {
	node := valueOf(root, "capabilities")
	if node == nil {
		return nil
	}
	line := lineOf(root, "capabilities")
	if p.Capabilities == nil {
		return &profiles.Error{Profile: name, Line: line, Err: errors.New("capabilities: give a list of capabilities ([] for none)")}
	}
	items := itemsOf(node)
	seen := map[string]bool{}
	for i, c := range *p.Capabilities {
		at := line
		if len(items) == len(*p.Capabilities) {
			at = items[i].Line
		}
		canonical, err := profiles.CheckCapability(c)
		if err != nil {
			return &profiles.Error{Profile: name, Line: at, Err: err}
		}
		seen[canonical] = true
	}
	list := []string{}
	for _, c := range profiles.Grantable() {
		if seen[c] {
			list = append(list, c)
		}
	}
	p.Capabilities = &list
	return nil
}

// recordLines gives every syscall of s the line it is written on, from the
// seccomp section's node, and refuses a syscall that is not a plain word
// (profiles.Syscall's decoding left its name empty). The nodes are walked
// in the order decoding filled the lists; where they do not match (YAML
// aliases, merge keys) a syscall keeps line 0 and errors about it name none.
func recordLines(name string, s *profiles.Seccomp, section *yaml.Node) error {
	var names []*profiles.Syscall
	var nodes []*yaml.Node
	add := func(list []profiles.Syscall, seq *yaml.Node) {
		items := itemsOf(seq)
		for i := range list {
			var n *yaml.Node
			if len(items) == len(list) {
				n = items[i]
			}
			names, nodes = append(names, &list[i]), append(nodes, n)
		}
	}
	add(s.Allow, valueOf(section, "allow"))
	allowIf := itemsOf(valueOf(section, "allow_if"))
	for i := range s.AllowIf {
		var n *yaml.Node
		if len(allowIf) == len(s.AllowIf) {
			n = valueOf(allowIf[i], "syscall")
		}
		names, nodes = append(names, &s.AllowIf[i].Syscall), append(nodes, n)
	}
	errno := itemsOf(valueOf(section, "errno"))
	for i := range s.Errno {
		var seq *yaml.Node
		if len(errno) == len(s.Errno) {
			seq = valueOf(errno[i], "syscalls")
		}
		add(s.Errno[i].Syscalls, seq)
	}
	add(s.Drop, valueOf(section, "drop"))
	for i, sc := range names {
		if n := nodes[i]; n != nil {
			if n.Kind == yaml.AliasNode && n.Alias != nil {
				n = n.Alias
			}
			sc.Line = n.Line
			if n.Kind != yaml.ScalarNode {
				sc.Name = ""
			}
		}
		if sc.Name == "" {
			return &profiles.Error{Profile: name, Line: sc.Line, Err: errors.New("a syscall name must be a plain word")}
		}
	}
	return nil
}

// valueOf returns the value of key in mapping n, or nil.
func valueOf(n *yaml.Node, key string) *yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// itemsOf returns the items of sequence n, or nil.
func itemsOf(n *yaml.Node) []*yaml.Node {
	if n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	return n.Content
}

// lineOf finds the line of a top-level key of mapping root.
func lineOf(root *yaml.Node, key string) int {
	for i := 0; i+1 < len(root.Content) && root.Kind == yaml.MappingNode; i += 2 {
		if root.Content[i].Value == key {
			return root.Content[i].Line
		}
	}
	return 0
}

func conditionalsOf(ds []profiles.Denial) []profiles.Conditional {
	var out []profiles.Conditional
	for _, d := range ds {
		for _, s := range d.Syscalls {
			out = append(out, profiles.Conditional{Syscall: s, Args: d.Args})
		}
	}
	return out
}

// yamlError turns a yaml.v3 error ("yaml: line 3: ...", or a list of
// "line N: ..." unmarshal errors) into one line about the first problem.
func yamlError(name string, err error) error {
	msg := err.Error()
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
	}
	if msg == "EOF" {
		msg = "empty file"
	}
	return &profiles.Error{Profile: name, Line: line, Err: errors.New(strings.ReplaceAll(msg, "\n", " "))}
}

// Marshal renders a profile as YAML.
func Marshal(p *profiles.Profile) ([]byte, error) {
	return yaml.Marshal(p)
}

// loaded is a parsed profile and where its `extends` is written, for the
// errors about its parent.
type loaded struct {
	profile     *profiles.Profile
	extendsLine int
}

// load reads one profile as written, without resolving its parents: the
// user's file of that name, else the built-in.
func load(user profiles.Files, name string) (loaded, error) {
	if !profiles.ValidName(name) {
		return loaded{}, &profiles.Error{Profile: name, Err: profiles.ErrBadName}
	}
	if f, ok := user[name]; ok {
		if f.Err != "" {
			return loaded{}, &profiles.Error{Profile: name, Err: errors.New(f.Err)}
		}
		p, line, err := parse(name, f.Path, f.Data)
		return loaded{p, line}, err
	}
	data, ok := profiles.BuiltinFile(name)
	if !ok {
		return loaded{}, &profiles.Error{Profile: name, Err: profiles.ErrUnknown}
	}
	p, line, err := parse(name, "built-in", data)
	return loaded{p, line}, err
}

// Resolve loads name from the user's files or the built-ins and merges it
// onto its parents. A user file may extend the built-in of its own name.
func Resolve(user profiles.Files, name string) (*profiles.Profile, error) {
	return resolve(user, name, map[string]bool{})
}

func resolve(user profiles.Files, name string, seen map[string]bool) (*profiles.Profile, error) {
	if seen[name] {
		return nil, &profiles.Error{Profile: name, Err: errors.New("extends itself (a cycle)")}
	}
	seen[name] = true
	l, err := load(user, name)
	if err != nil {
		return nil, err
	}
	p := l.profile
	if p.Extends == "" {
		return p, nil
	}
	if p.Extends == name {
		parent, err := resolve(nil, name, map[string]bool{})
		if err != nil {
			return nil, err
		}
		return merge(parent, p), nil
	}
	parent, err := resolve(user, p.Extends, seen)
	if err != nil {
		var pe *profiles.Error
		if errors.As(err, &pe) && errors.Is(err, profiles.ErrUnknown) {
			return nil, &profiles.Error{Profile: name, Line: l.extendsLine, Err: fmt.Errorf("extends unknown profile %q", p.Extends)}
		}
		return nil, err
	}
	return merge(parent, p), nil
}

// merge lays child over parent.
func merge(parent, child *profiles.Profile) *profiles.Profile {
	out := *child
	out.Extends = ""
	if out.Description == "" {
		out.Description = parent.Description
	}
	if out.Network == "" {
		out.Network = parent.Network
	}
	// A locked network stays locked, and what it was locked at.
	if parent.NetworkLocked {
		out.NetworkLocked = true
		if out.Network != "none" {
			out.Network = parent.Network
		}
	}
	if out.Capabilities == nil && parent.Capabilities != nil {
		// Absent: the parent's set, as a list of the child's own.
		inherited := append([]string{}, *parent.Capabilities...)
		out.Capabilities = &inherited
	}
	if out.Limits.Memory == "" {
		out.Limits.Memory = parent.Limits.Memory
	}
	if out.Limits.CPUs == 0 {
		out.Limits.CPUs = parent.Limits.CPUs
	}
	if out.Limits.Pids == 0 {
		out.Limits.Pids = parent.Limits.Pids
	}
	if out.Limits.Scratch == "" {
		out.Limits.Scratch = parent.Limits.Scratch
	}
	out.Masks = append(append([]string{}, parent.Masks...), child.Masks...)
	out.ReadOnly = append(append([]string{}, parent.ReadOnly...), child.ReadOnly...)
	out.Env = map[string]string{}
	for k, v := range parent.Env {
		out.Env[k] = v
	}
	for k, v := range child.Env {
		out.Env[k] = v
	}
	if len(out.Env) == 0 {
		out.Env = nil
	}
	dropped := map[string]bool{}
	for _, d := range child.Seccomp.Drop {
		dropped[d.Name] = true
	}
	var allow []profiles.Syscall
	for _, a := range parent.Seccomp.Allow {
		if !dropped[a.Name] {
			allow = append(allow, a)
		}
	}
	var allowIf []profiles.Conditional
	for _, c := range parent.Seccomp.AllowIf {
		if !dropped[c.Syscall.Name] {
			allowIf = append(allowIf, c)
		}
	}
	out.Seccomp.Allow = append(allow, child.Seccomp.Allow...)
	out.Seccomp.AllowIf = append(allowIf, child.Seccomp.AllowIf...)
	var errnos []profiles.Denial
	for _, d := range parent.Seccomp.Errno {
		kept := d
		kept.Syscalls = nil
		for _, sc := range d.Syscalls {
			if !dropped[sc.Name] {
				kept.Syscalls = append(kept.Syscalls, sc)
			}
		}
		if len(kept.Syscalls) > 0 {
			errnos = append(errnos, kept)
		}
	}
	out.Seccomp.Errno = append(errnos, child.Seccomp.Errno...)
	out.Seccomp.Drop = nil
	notes := map[string]string{}
	for k, v := range parent.Seccomp.Notes {
		notes[k] = v
	}
	for k, v := range child.Seccomp.Notes {
		notes[k] = v
	}
	if len(notes) > 0 {
		out.Seccomp.Notes = notes
	}
	return &out
}

// List describes every profile: the user's files, which shadow built-ins
// of the same name, and the built-ins.
func List(user profiles.Files) []profiles.Info {
	var out []profiles.Info
	add := func(name string) {
		info := profiles.Info{Name: name}
		if l, err := load(user, name); err == nil {
			info.Source, info.Description = l.profile.Source, l.profile.Description
		} else {
			info.Source, info.Description = "invalid", err.Error()
		}
		out = append(out, info)
	}
	for name := range user {
		add(name)
	}
	for _, name := range profiles.BuiltinNames() {
		if _, shadowed := user[name]; !shadowed {
			add(name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
