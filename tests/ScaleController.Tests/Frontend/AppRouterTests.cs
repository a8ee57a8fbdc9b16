using FaaST.ScaleController.Frontend;
using Microsoft.AspNetCore.Http;

namespace FaaST.ScaleController.Tests.Frontend;

/// <summary>The routing rules of docs/scaling.md ("The frontend").</summary>
public sealed class AppRouterTests
{
    private static (bool Found, string App, string PathAndQuery, string? Reason) Route(AppRouter router, string? host, string path, string query = "")
    {
        var found = router.TryRoute(host, new PathString(path), new QueryString(query), out var app, out var pathAndQuery, out var reason);
        return (found, app, pathAndQuery, reason);
    }

    private static AppRouter Platform(params string[] apps)
    {
        var router = AppRouter.MultiApp();
        foreach (var app in apps)
            router.AddApp(app);
        return router;
    }

    [Fact]
    public void Single_app_mode_sends_every_path_and_host_to_the_app_unchanged()
    {
        var router = AppRouter.SingleApp("counter");

        Assert.Equal((true, "counter", "/api/increment?by=2", null), Route(router, "other.localhost", "/api/increment", "?by=2"));
        Assert.Equal((true, "counter", "/admin/host/status", null), Route(router, "127.0.0.1", "/admin/host/status"));
        Assert.Equal((true, "counter", "/", null), Route(router, null, ""));
    }

    [Fact]
    public void Path_based_routing_strips_the_app_prefix_and_keeps_the_query()
    {
        var router = Platform("shop", "blog");

        Assert.Equal((true, "shop", "/api/orders?x=1", null), Route(router, "127.0.0.1", "/shop/api/orders", "?x=1"));
        Assert.Equal((true, "blog", "/admin/cache", null), Route(router, "127.0.0.1", "/blog/admin/cache"));
    }

    [Fact]
    public void A_path_that_is_only_the_app_forwards_as_the_root()
    {
        Assert.Equal((true, "shop", "/", null), Route(Platform("shop"), "127.0.0.1", "/shop"));
        Assert.Equal((true, "shop", "/", null), Route(Platform("shop"), "127.0.0.1", "/shop/"));
    }

    [Fact]
    public void Host_based_routing_by_app_localhost_keeps_the_path_unchanged()
    {
        Assert.Equal((true, "shop", "/api/orders", null), Route(Platform("shop", "api"), "shop.localhost", "/api/orders"));
    }

    [Fact]
    public void Host_based_routing_accepts_any_host_whose_first_label_is_a_deployed_app()
    {
        Assert.Equal((true, "shop", "/api/orders", null), Route(Platform("shop"), "shop.example.com", "/api/orders"));
    }

    [Fact]
    public void App_names_match_case_insensitively_and_route_to_the_deployed_spelling()
    {
        var router = Platform("Shop");

        Assert.Equal((true, "Shop", "/api/x", null), Route(router, "SHOP.localhost", "/api/x"));
        Assert.Equal((true, "Shop", "/api/x", null), Route(router, "127.0.0.1", "/shop/api/x"));
    }

    [Fact]
    public void An_unknown_app_localhost_host_is_refused_naming_the_app_and_the_host()
    {
        var (found, _, _, reason) = Route(Platform("shop"), "blog.localhost", "/shop/api/x");

        Assert.False(found);
        Assert.Equal("no app named \"blog\" is deployed (from the Host header \"blog.localhost\")", reason);
    }

    [Fact]
    public void An_unknown_app_in_the_path_is_refused_naming_the_app_and_the_path()
    {
        var (found, _, _, reason) = Route(Platform("shop"), "127.0.0.1", "/blog/api/x");

        Assert.False(found);
        Assert.Equal("no app named \"blog\" is deployed (from the path \"/blog/api/x\"; route as /APP/... or with Host APP.localhost)", reason);
    }

    [Fact]
    public void A_request_for_the_root_of_a_platform_is_refused_with_how_to_route()
    {
        var (found, _, _, reason) = Route(Platform("shop"), "127.0.0.1", "/");

        Assert.False(found);
        Assert.Equal("no app in the request: route as /APP/... or with Host APP.localhost", reason);
    }

    [Fact]
    public void A_forwarded_path_stays_uri_escaped()
    {
        Assert.Equal((true, "shop", "/api/a%20b%3F?q=a%26b", null), Route(Platform("shop"), "127.0.0.1", "/shop/api/a b?", "?q=a%26b"));
    }

    [Fact]
    public void A_removed_app_is_no_longer_routed()
    {
        var router = Platform("shop", "blog");

        router.RemoveApp("SHOP");

        Assert.False(Route(router, "127.0.0.1", "/shop/api/x").Found);
        Assert.Equal(["blog"], router.Apps);
    }

    [Fact]
    public void An_app_name_with_a_dot_or_a_slash_is_rejected_naming_it()
    {
        var router = AppRouter.MultiApp();

        Assert.Equal("app name \"a.b\" cannot be routed: it must not contain '/' or '.' (Parameter 'app')", Assert.Throws<ArgumentException>(() => router.AddApp("a.b")).Message);
        Assert.Throws<ArgumentException>(() => router.AddApp("a/b"));
    }
}
