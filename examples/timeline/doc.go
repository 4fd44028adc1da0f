// Package timeline draws a demo's run as an SVG timeline, with nothing but
// the standard library: one lane per client with the requests that finished
// in each 100 ms (ok above the client's line in its colour, failed below it
// in red), the phases of the run shaded and labelled across the lanes
// (a blue/green switchover's PREPARATION, IN_PROGRESS, POST, COMPLETED; a
// failover's writer down, new writer), events marked by dashed lines, and
// each client's longest pause bracketed and labelled with its length in ms.
// The x axis is in seconds from the start of the workload.
//
// The demos under examples/ (switchover, failover) share it for their -svg
// flag: each turns its per-request records (when a request finished,
// whether it succeeded) and its timeline into a Chart and calls
// Chart.WriteSVG. It is a helper of those demos, not part of holdfast's
// API, and makes no compatibility promise.
//
// The document is plain SVG 1.1 that browsers and rsvg-convert render
// alike; each client's series is a <g id="client-NAME" class="client">
// (NAME made of lower-case letters, digits and '-', the client's name in
// its data-name attribute), each phase a <rect class="band">, each pause a
// <g class="pause">, so that tests can find them with encoding/xml.
package timeline
