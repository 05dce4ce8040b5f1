package a2a

// Transport is the transport the Comm's operations use: after Connect (or
// Join) TransportIPC or TransportNCCL, what TransportAuto chose; before,
// the Config's. It costs the Comm's lock.
func (c *Comm) Transport() Transport {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t == nil {
		return c.cfg.Transport
	}
	return c.t.Kind()
}
