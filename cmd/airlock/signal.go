package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// signalContext is a context cancelled by SIGINT or SIGTERM whose signal
// handling is installed the first time anything asks whether it is done
// (Done, Err or Value, which context.WithCancel and friends call):
// installing it starts a thread and two goroutines, a tenth of what
// `airlock version` costs, which a command that never waits on its
// context does not need. Until then a signal has its default effect and
// ends the process, as it would for any program that does not handle it.
type signalContext struct {
	once sync.Once
	ctx  context.Context
	stop context.CancelFunc
}

func (c *signalContext) init() {
	c.ctx, c.stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func (c *signalContext) Deadline() (time.Time, bool) { return time.Time{}, false }

func (c *signalContext) Done() <-chan struct{} {
	c.once.Do(c.init)
	return c.ctx.Done()
}

func (c *signalContext) Err() error {
	c.once.Do(c.init)
	return c.ctx.Err()
}

// Value answers from the installed context, so that a context derived
// from this one finds its canceller there and needs no goroutine of its
// own to watch Done.
func (c *signalContext) Value(key any) any {
	c.once.Do(c.init)
	return c.ctx.Value(key)
}

// Stop restores the default handling of the signals, if it was replaced.
func (c *signalContext) Stop() {
	c.once.Do(func() { c.ctx = context.Background() }) // no installing from now on
	if c.stop != nil {
		c.stop()
	}
}
