// Package handle is what a rank tells its peers to form a group: the
// handle's wire format (its buffer's address, how it is shared and its
// IPC handle, its device, host and process, the layout and transport it
// asks for), decoded defensively, and what the group decides from the
// handles alone, alike on every rank: its transport (Choose). It knows
// nothing of the driver.
package handle
