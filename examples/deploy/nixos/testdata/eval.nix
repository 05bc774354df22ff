# Evaluates fleetd.nix without nixpkgs, for the test in
# examples/fleetd/internal/daemon: a stand-in for the few functions of
# nixpkgs' lib the module calls, built on builtins, and one host's
# settings. The module system itself (option types, merging) is not
# modelled: this checks that the module evaluates, and what it makes.
let
  lib = {
    mkOption = attrs: attrs;
    mkEnableOption = description: { inherit description; };
    mkIf = condition: value: if condition then value else { };
    types = {
      bool = "bool";
      str = "str";
      package = "package";
      nullOr = t: "null or ${t}";
      attrsOf = t: "attribute set of ${t}";
    };
    boolToString = b: if b then "true" else "false";
    optional = condition: x: if condition then [ x ] else [ ];
    optionalAttrs = condition: attrs: if condition then attrs else { };
    mapAttrsToList = f: attrs: map (name: f name attrs.${name}) (builtins.attrNames attrs);
    attrValues = builtins.attrValues;
    all = builtins.all;
    filter = builtins.filter;
    concatStringsSep = builtins.concatStringsSep;
    hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
    splitString = sep: s: builtins.filter builtins.isString (builtins.split sep s);
    last = l: builtins.elemAt l (builtins.length l - 1);
    toInt = s: builtins.fromJSON s;
  };
  host = {
    enable = true;
    package = "/nix/store/00000000000000000000000000000000-fleetd";
    controlPlanes = true;
    autoProvision = true;
    listen = ":8443";
    metricsListen = "127.0.0.1:9464";
    openFirewall = true;
    publicURL = "https://spore.example:8443";
    nodesFile = "/srv/infra/clusters/folly/inventory/nodes.yaml";
    topologyFile = null;
    namespace = "tinkerbell";
    netbox = {
      url = "https://capsule.example";
      tokenFile = "/run/secrets/fleetd/netbox-token";
      switch = "switch";
      bindingAuthor = "terraform";
    };
    tls = {
      certFile = "/run/secrets/fleetd/tls.crt";
      keyFile = "/run/secrets/fleetd/tls.key";
    };
    secretsBundleFile = "/run/secrets/fleetd/secrets.yaml";
    approverTokenFile = "/run/secrets/fleetd/approver-token";
    approverCAFile = null;
    tinkerbellKubeconfigFile = "/run/secrets/fleetd/tinkerbell.kubeconfig";
    clusterKubeconfigFile = "/run/secrets/fleetd/cluster.kubeconfig";
    settings = { FLEET_CONFIG_TTL = "2h"; };
  };
  module = import ../fleetd.nix { inherit lib; config = { homelab.fleetd = host; }; };
in
{
  options = builtins.attrNames module.options.homelab.fleetd;
  failedAssertions = map (a: a.message) (builtins.filter (a: !a.assertion) module.config.assertions);
  firewall = module.config.networking.firewall.allowedTCPPorts;
  service = module.config.systemd.services.fleetd;
}
