// Package catalogrender writes operations_gen.go of package parley: every operation of the
// library's catalog (parley_operations) as a typed method of Client with a parameter struct.
// The generator (internal/gencatalog, run by `go generate`) and the test that keeps the
// committed file current (TestOperationsGenerated) both call Render.
package catalogrender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"sort"
	"strings"
)

// Operation is what Render reads of a catalog entry (parley.Operation, as JSON).
type Operation struct {
	Name       string         `json:"name"`
	Method     string         `json:"method"`
	Path       string         `json:"path"`
	Summary    string         `json:"summary"`
	Parameters []Parameter    `json:"parameters"`
	Defaults   map[string]any `json:"defaults"`
}

// Parameter is one parameter of an operation.
type Parameter struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	// Default is the value the library sends when the parameter is left out (nil: none).
	Default any `json:"default"`
}

// FromCatalog reads the catalog as the package gives it (parley.Operations), through JSON.
func FromCatalog(catalog any) ([]Operation, error) {
	text, err := json.Marshal(catalog)
	if err != nil {
		return nil, err
	}
	var operations []Operation
	return operations, json.Unmarshal(text, &operations)
}

// wireTypes maps the catalog's wire types to Go types.
var wireTypes = map[string]string{
	"string": "string", "integer": "int64", "boolean": "bool", "string[]": "[]string",
	"object": "map[string]string", "object<integer>": "map[string]int64", "object[]": "[]MetaArrayItem",
	"integer[]": "[]int64", "any": "any",
}

// Answers gives the Go type of each operation's answer where it is one of the package's
// objects; every other operation answers json.RawMessage. The catalog does not say it.
var Answers = map[string]string{
	"get_current_user": "User", "update_current_user": "User",
	"list_users": "UserListPage", "list_my_group_channels": "ChannelListPage",
	"list_group_channels": "ChannelListPage", "list_public_group_channels": "ChannelListPage",
	"list_channel_changelogs": "ChannelChangelogPage",
	"create_group_channel":    "Channel", "get_group_channel": "Channel", "update_group_channel": "Channel",
	"invite_users": "Channel", "accept_invitation": "Channel", "join_channel": "Channel",
	"freeze_channel": "Channel", "unfreeze_channel": "Channel",
	"list_messages": "MessageListPage", "list_thread_replies": "MessageListPage",
	"list_message_changelogs": "MessageChangelogPage",
	"get_message":             "Message", "update_message": "Message", "copy_message": "Message",
	"add_message_meta_array": "Message", "update_message_meta_array": "Message",
}

// initialisms are the words Go spells in capitals.
var initialisms = map[string]string{"id": "ID", "ids": "IDs", "url": "URL", "urls": "URLs", "ts": "TS", "api": "API"}

// GoName spells a wire name (snake_case) as an exported Go name.
func GoName(wire string) string {
	var out strings.Builder
	for _, word := range strings.Split(wire, "_") {
		if word == "" {
			continue
		}
		if spelled, ok := initialisms[word]; ok {
			out.WriteString(spelled)
		} else {
			out.WriteString(strings.ToUpper(word[:1]) + word[1:])
		}
	}
	return out.String()
}

// Command is how the file is regenerated (named in its header).
const Command = "go generate ./... (in bindings/go)"

// Render returns the Go source of operations_gen.go for the catalog, gofmt-formatted.
func Render(catalog []Operation) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated from the library's operation catalog (parley_operations) by internal/gencatalog; DO NOT EDIT.\n")
	fmt.Fprintf(&b, "// Regenerate with %s when the catalog changes (TestOperationsGenerated fails until then).\n\n", Command)
	b.WriteString("package parley\n\nimport (\n\t\"context\"\n\t\"encoding/json\"\n)\n\n")
	seen := map[string]string{}
	for _, operation := range catalog {
		method := GoName(operation.Name)
		if other, ok := seen[method]; ok {
			return nil, fmt.Errorf("operations %q and %q both become %s", other, operation.Name, method)
		}
		seen[method] = operation.Name
		answer := Answers[operation.Name]
		if answer == "" {
			answer = "json.RawMessage"
		}
		params := method + "Params"
		// The parameter struct.
		fmt.Fprintf(&b, "// %s are the parameters of Client.%s, by their wire names (docs/PROTOCOL.md).\n", params, method)
		fmt.Fprintf(&b, "type %s struct {\n", params)
		fields := map[string]string{}
		for _, parameter := range operation.Parameters {
			field := GoName(parameter.Name)
			if other, ok := fields[field]; ok {
				return nil, fmt.Errorf("%s: parameters %q and %q both become %s", operation.Name, other, parameter.Name, field)
			}
			fields[field] = parameter.Name
			goType, known := wireTypes[parameter.Type]
			if !known {
				goType = "any"
			}
			var notes []string
			tag := parameter.Name + ",omitempty"
			scalar := goType == "string" || goType == "int64" || goType == "bool"
			switch {
			case parameter.Required && goType == "bool":
				tag = parameter.Name
				notes = append(notes, "required")
			case parameter.Required:
				notes = append(notes, "required")
			case scalar:
				goType = "*" + goType
			}
			if parameter.Name == "user_id" && strings.Contains(operation.Path, "{user_id}") {
				notes = append(notes, "the connected user unless given")
			}
			if parameter.Default != nil {
				notes = append(notes, fmt.Sprintf("default %v", describe(parameter.Default)))
			}
			comment := ""
			if len(notes) > 0 {
				comment = " // " + strings.Join(notes, "; ")
			}
			fmt.Fprintf(&b, "\t%s %s `json:\"%s\"`%s\n", field, goType, tag, comment)
		}
		b.WriteString("}\n\n")
		// The method.
		summary := strings.ReplaceAll(operation.Summary, "`", "")
		if summary == "" {
			summary = "An operation of the catalog."
		}
		fmt.Fprintf(&b, "// %s performs %s: %s\n//\n// %s %s", method, operation.Name, summary, operation.Method, operation.Path)
		if len(operation.Defaults) > 0 {
			keys := make([]string, 0, len(operation.Defaults))
			for key := range operation.Defaults {
				keys = append(keys, key)
			}
			sort.Strings(keys)
			given := make([]string, len(keys))
			for i, key := range keys {
				given[i] = fmt.Sprintf("%s=%s", key, describe(operation.Defaults[key]))
			}
			fmt.Fprintf(&b, "; the library sends %s unless told otherwise", strings.Join(given, ", "))
		}
		b.WriteString(".\n")
		fmt.Fprintf(&b, "func (c *Client) %s(ctx context.Context, params %s) (%s, error) {\n", method, params, answer)
		fmt.Fprintf(&b, "\treturn performInto[%s](ctx, c, %q, params)\n}\n\n", answer, operation.Name)
	}
	return format.Source(b.Bytes())
}

func describe(value any) string {
	switch v := value.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", value)
}
