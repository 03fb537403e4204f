// Package document prints a command's plan or report as one JSON or YAML document, the same
// fields under the same names in both (flotillactl's -o json|yaml).
package document
