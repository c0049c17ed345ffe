// Package e2e holds the end-to-end tests: the real server on a loopback
// socket with a synthetic model, driven through the official client
// libraries and raw HTTP the way editors and agents drive it.
package e2e
