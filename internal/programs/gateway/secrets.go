package main

// bindSecrets makes the per-sandbox authority and the placeholders of the
// secrets bound to hosts; a refusal is a "jail: ..." line.
func (g *gateway) bindSecrets() string {
	if len(g.cfg.Secrets) > 0 {
		return "jail: --secret NAME@HOST: not supported yet"
	}
	return ""
}
