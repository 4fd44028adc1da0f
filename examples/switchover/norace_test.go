//go:build !race

package main

const pauseSlack = 150
