package parley

/*
#include "shim.h"
*/
import "C"

import "encoding/json"

// Version is the library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.parley_version()) }

// OperationParameter is one parameter of a catalog operation.
type OperationParameter struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	// Default is the value the operation sends when the parameter is left out (nil: none).
	Default any `json:"default,omitempty"`
}

// Operation is an entry of the library's operation catalog (docs/C-REFERENCE.md).
type Operation struct {
	Name       string                    `json:"name"`
	Method     string                    `json:"method"`
	Path       string                    `json:"path"`
	Summary    string                    `json:"summary"`
	Parameters []OperationParameter      `json:"parameters"`
	Required   []string                  `json:"required"`
	Defaults   map[string]any            `json:"defaults"`
	Fixed      map[string]any            `json:"fixed"`
	ValueNames map[string]map[string]any `json:"value_names"`
}

// Operations is the library's operation catalog: what Perform runs by name.
func Operations() ([]Operation, error) {
	var operations []Operation
	return operations, readTable("operations", func(out **C.char) C.int { return C.parley_operations(out) }, &operations)
}

// EventCategory is an entry of the library's table of event categories: Name is an
// Event's Category (Category(Name) is one of the Category constants), Source "server",
// "sync" or "local".
type EventCategory struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// EventCategories lists every category an Event can have.
func EventCategories() ([]EventCategory, error) {
	var categories []EventCategory
	return categories, readTable("event categories", func(out **C.char) C.int { return C.parley_event_categories(out) }, &categories)
}

// CollectionSources lists every Source a view can report, by code and name.
func CollectionSources() ([]Source, error) {
	var table []struct {
		Code int    `json:"code"`
		Name string `json:"name"`
	}
	err := readTable("collection sources", func(out **C.char) C.int { return C.parley_collection_sources(out) }, &table)
	sources := make([]Source, len(table))
	for i, entry := range table {
		sources[i] = Source{Code: entry.Code, Name: entry.Name}
	}
	return sources, err
}

// ConfigurationKey describes one configuration key (Config.Extra takes any of them).
type ConfigurationKey struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Default any    `json:"default"`
	Values  string `json:"values"`
	Summary string `json:"summary"`
}

// ConfigurationKeys lists every key of the client's configuration document.
func ConfigurationKeys() ([]ConfigurationKey, error) {
	var keys []ConfigurationKey
	return keys, readTable("configuration keys", func(out **C.char) C.int { return C.parley_configuration_keys(out) }, &keys)
}

func readTable(op string, read func(out **C.char) C.int, into any) error {
	var text *C.char
	if err := call(op, func() C.int { return read(&text) }); err != nil {
		return err
	}
	return decodeRaw(op, json.RawMessage(takeString(text)), into)
}

func decodeRaw(op string, text json.RawMessage, into any) error {
	return decode(op, string(text), into)
}
