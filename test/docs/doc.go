// Package docs holds no code: its tests check that the documents say what
// the code does. ARCHITECTURE.md names only tests that exist and lists
// every package; README.md and RUNBOOK.md name every finding kind the code
// can open; relative links in the documents lead to files that exist.
package docs
