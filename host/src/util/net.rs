//! Addresses: which are the public internet's (what lab itself connects to on an
//! agent's or a subscriber's behalf: push endpoints, a sandbox's egress).

/// Whether `ip` is an address of the public internet: not private, loopback,
/// link-local (cloud metadata lives there), shared (CGNAT), unique-local, multicast,
/// documentation, benchmarking, reserved or unspecified. An IPv4 address inside IPv6
/// (mapped, compatible, NAT64 well-known) is judged as the IPv4 address.
pub fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(a) => {
            let o = a.octets();
            !(a.is_unspecified()
                || a.is_loopback()
                || a.is_private()
                || a.is_link_local()
                || a.is_broadcast()
                || a.is_multicast()
                || a.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10, shared (CGNAT)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24, protocol assignments
                || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15, benchmarking
                || o[0] >= 240) // 240.0.0.0/4, reserved
        }
        IpAddr::V6(a) => {
            if let Some(v4) = a.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = a.segments();
            // ::a.b.c.d (compatible, deprecated) and 64:ff9b::a.b.c.d (NAT64).
            if (s[..6] == [0; 6] && !a.is_loopback() && !a.is_unspecified()) || s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let o = a.octets();
                return is_public(IpAddr::V4(std::net::Ipv4Addr::new(o[12], o[13], o[14], o[15])));
            }
            !(a.is_unspecified()
                || a.is_loopback()
                || a.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // fc00::/7, unique local
                || (s[0] & 0xffc0) == 0xfe80 // fe80::/10, link-local
                || (s[0] & 0xffc0) == 0xfec0 // fec0::/10, site-local (deprecated)
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] == 0x2001 && s[1] < 0x0200) // 2001::/23, protocol assignments (Teredo…)
                || s[0] == 0x0100 && s[1..4] == [0, 0, 0]) // 100::/64, discard
        }
    }
}
