// Package docs holds no code: its tests check that the documents say what
// the code does. ARCHITECTURE.md names only tests that exist and lists
// every package; docs/events.md and RUNBOOK.md name every finding kind the
// code can open; in every document (the root's and docs/'s) relative links
// lead to files and headings that exist and every test named exists; the
// README links every page of docs/.
package docs
