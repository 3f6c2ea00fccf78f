// yaml-oracle: what yaml.v3 makes of YAML, for the differential tests of
// krm-yaml (tests/src/yamldiff) and the golden files of its unit tests
// (krm-yaml/tests/fixtures/yaml/*/regen.sh).
//
// Built offline in GOPATH mode from Debian's golang-go and
// golang-gopkg-yaml.v3-dev (gopkg.in/yaml.v3 3.0.1: kpt's go.yaml.in/yaml/v3
// v3.0.4 is the same code under a new module path, plus the kyaml fork's
// CompactSeqIndent, which 3.0.1 lacks; the kpt comparisons cover that).
//
//	yaml-oracle dump < in.yaml        node trees as JSON, or {"error": ...} and exit 1
//	yaml-oracle encode < in.json      node trees (dump's JSON) -> YAML
//	yaml-oracle batch DIR             for each DIR/NAME.yaml: NAME.json as dump
//	                                  writes it and, if it parsed, NAME.out as
//	                                  encode writes those trees (one process
//	                                  for many cases)
//
// The JSON is krm-yaml's `Node` serde form: kind, style, tag, value,
// anchor, alias, head, line, foot, line_no, column, content; empty fields
// left out.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

type jnode struct {
	Kind    yaml.Kind  `json:"kind"`
	Style   yaml.Style `json:"style,omitempty"`
	Tag     string     `json:"tag,omitempty"`
	Value   string     `json:"value,omitempty"`
	Anchor  string     `json:"anchor,omitempty"`
	Alias   string     `json:"alias,omitempty"`
	Head    string     `json:"head,omitempty"`
	Line    string     `json:"line,omitempty"`
	Foot    string     `json:"foot,omitempty"`
	LineNo  int        `json:"line_no,omitempty"`
	Column  int        `json:"column,omitempty"`
	Content []*jnode   `json:"content,omitempty"`
}

func toJSON(n *yaml.Node) *jnode {
	j := &jnode{Kind: n.Kind, Style: n.Style, Tag: n.Tag, Value: n.Value, Anchor: n.Anchor,
		Head: n.HeadComment, Line: n.LineComment, Foot: n.FootComment, LineNo: n.Line, Column: n.Column}
	if n.Alias != nil {
		j.Alias = n.Alias.Anchor
	}
	for _, c := range n.Content {
		j.Content = append(j.Content, toJSON(c))
	}
	return j
}

// fromJSON rebuilds the trees; an alias points at the last node before it
// (in document order) with that anchor, as the decoder resolves it.
func fromJSON(j *jnode, anchors map[string]*yaml.Node) *yaml.Node {
	n := &yaml.Node{Kind: j.Kind, Style: j.Style, Tag: j.Tag, Value: j.Value, Anchor: j.Anchor,
		HeadComment: j.Head, LineComment: j.Line, FootComment: j.Foot, Line: j.LineNo, Column: j.Column}
	if j.Anchor != "" {
		anchors[j.Anchor] = n
	}
	if j.Alias != "" {
		n.Alias = anchors[j.Alias]
	}
	for _, c := range j.Content {
		n.Content = append(n.Content, fromJSON(c, anchors))
	}
	return n
}

// decode is the loop kyaml's reader runs: Decode until io.EOF. A panic
// of the decoder is that case's answer, not the end of a batch.
func decode(in []byte) (docs []*yaml.Node, err error) {
	defer func() {
		if r := recover(); r != nil {
			docs, err = nil, fmt.Errorf("panic: %v", r)
		}
	}()
	d := yaml.NewDecoder(bytes.NewReader(in))
	for {
		var n yaml.Node
		err := d.Decode(&n)
		if err == io.EOF {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		docs = append(docs, &n)
	}
}

// encode writes documents as kyaml's writer does: NewEncoder, SetIndent(2),
// one Encode per document, Close.
func encode(docs []*yaml.Node) (out []byte, err error) {
	defer func() {
		// The encoder panics on some trees it cannot write; that is an
		// answer too, not a crash of the oracle.
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	var b bytes.Buffer
	e := yaml.NewEncoder(&b)
	e.SetIndent(2)
	for _, d := range docs {
		if err := e.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := e.Close(); err != nil && len(docs) > 0 {
		return nil, err
	}
	return b.Bytes(), nil
}

func dumpJSON(docs []*yaml.Node, err error) []byte {
	var v interface{}
	if err != nil {
		v = map[string]string{"error": err.Error()}
	} else {
		js := []*jnode{}
		for _, d := range docs {
			js = append(js, toJSON(d))
		}
		v = js
	}
	out, merr := json.MarshalIndent(v, "", " ")
	if merr != nil {
		fail(merr)
	}
	return append(out, '\n')
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "yaml-oracle:", err)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: yaml-oracle dump|encode|batch DIR"))
	}
	switch os.Args[1] {
	case "dump":
		in, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		docs, derr := decode(in)
		os.Stdout.Write(dumpJSON(docs, derr))
		if derr != nil {
			os.Exit(1)
		}
	case "encode":
		if len(os.Args) > 2 {
			fail(fmt.Errorf("encode %s: gopkg.in/yaml.v3 3.0.1 has no CompactSeqIndent", os.Args[2]))
		}
		var js []*jnode
		if err := json.NewDecoder(os.Stdin).Decode(&js); err != nil {
			fail(err)
		}
		anchors := map[string]*yaml.Node{}
		var docs []*yaml.Node
		for _, j := range js {
			docs = append(docs, fromJSON(j, anchors))
		}
		out, err := encode(docs)
		if err != nil {
			fail(err)
		}
		os.Stdout.Write(out)
	case "batch":
		if len(os.Args) != 3 {
			fail(fmt.Errorf("usage: yaml-oracle batch DIR"))
		}
		dir := os.Args[2]
		names, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			fail(err)
		}
		for _, name := range names {
			in, err := os.ReadFile(name)
			if err != nil {
				fail(err)
			}
			base := strings.TrimSuffix(name, ".yaml")
			docs, derr := decode(in)
			if err := os.WriteFile(base+".json", dumpJSON(docs, derr), 0o644); err != nil {
				fail(err)
			}
			if derr != nil {
				continue
			}
			out, eerr := encode(docs)
			if eerr != nil {
				out = []byte("error: " + eerr.Error() + "\n")
			}
			if err := os.WriteFile(base+".out", out, 0o644); err != nil {
				fail(err)
			}
		}
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}
