// Package console tests the review console (services/console) in real
// Chromium against the real registry, discovery and admission: sign-in,
// the review queue, the descriptor diff of the README tour's change,
// approving exactly the digest shown (and the refusal, with the new diff,
// of a digest that changed under the page), the ALLOW admission then
// gives, tenant isolation, a non-owner's refused approval, CSRF, and an
// axe-core accessibility check of every page at 1280×800 and 390×844.
package console
