using System.Net;
using System.Net.Http.Headers;
using System.Security.Cryptography;
using System.Text;
using System.Text.Json;

namespace FaaST.Runtime.Tests;

/// <summary>
/// Python's HttpRequest.form / .files and multi-valued response headers through the real host, the real
/// Python worker and HttpClient's own multipart encoding (which quotes the boundary).
/// </summary>
[Collection("azurite")]
public sealed class PythonHttpFormTests(AzuriteFixture azurite)
{
    /// <summary>Echoes the form fields and, per file, its field, file name, type, size and SHA-256.</summary>
    private const string EchoFormPy = """
        import hashlib
        import json
        import azure.functions as func

        def main(req: func.HttpRequest) -> func.HttpResponse:
            files = []
            for field, storages in req.files.lists():
                for f in storages:
                    data = f.read()
                    files.append({"field": field, "filename": f.filename, "type": f.content_type,
                                  "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
            return func.HttpResponse(json.dumps({"fields": req.form.to_dict(flat=False), "files": files}),
                                     mimetype="application/json")
        """;

    private const string CookiesPy = """
        import azure.functions as func

        def main(req: func.HttpRequest) -> func.HttpResponse:
            resp = func.HttpResponse("cookies set")
            resp.headers.add("Set-Cookie", "session=abc; Path=/; HttpOnly")
            resp.headers.add("Set-Cookie", "theme=dark; Max-Age=3600")
            resp.headers.add("X-Tag", "a")
            resp.headers.add("X-Tag", "b")
            return resp
        """;

    private static TestApp FormApp() => new TestApp("python")
        .Function("EchoForm", TestApp.HttpFunctionJson, ("__init__.py", EchoFormPy))
        .Function("Cookies", TestApp.HttpFunctionJson, ("__init__.py", CookiesPy));

    private static ByteArrayContent File(byte[] data, string type)
    {
        var content = new ByteArrayContent(data);
        content.Headers.ContentType = MediaTypeHeaderValue.Parse(type);
        return content;
    }

    private static async Task<JsonElement> PostAsync(HostUnderTest host, HttpContent content)
    {
        var response = await host.Http.PostAsync("/api/EchoForm", content);
        var text = await response.Content.ReadAsStringAsync();
        Assert.True(response.StatusCode == HttpStatusCode.OK, $"{(int)response.StatusCode}: {text}");
        using var doc = JsonDocument.Parse(text);
        return doc.RootElement.Clone();
    }

    [Fact]
    public async Task Multipart_uploads_reach_the_function_as_files_and_form_fields()
    {
        using var app = FormApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);

        // One file.
        using (var one = new MultipartFormDataContent())
        {
            one.Add(File("hello, file"u8.ToArray(), "text/plain"), "file", "hello.txt");
            var echo = await PostAsync(host, one);
            var file = Assert.Single(echo.GetProperty("files").EnumerateArray());
            Assert.Equal("file", file.GetProperty("field").GetString());
            Assert.Equal("hello.txt", file.GetProperty("filename").GetString());
            Assert.Equal("text/plain", file.GetProperty("type").GetString());
            Assert.Equal(11, file.GetProperty("size").GetInt32());
        }

        // Several files under one name, and fields mixed in (one of them twice, one non-ASCII).
        using (var mixed = new MultipartFormDataContent())
        {
            mixed.Add(new StringContent("Zürich"), "city");
            mixed.Add(File([0, 1, 2, 3], "application/octet-stream"), "docs", "a.bin");
            mixed.Add(new StringContent("x"), "tag");
            mixed.Add(File("second"u8.ToArray(), "text/plain"), "docs", "b.txt");
            mixed.Add(new StringContent("y"), "tag");
            var echo = await PostAsync(host, mixed);
            var fields = echo.GetProperty("fields");
            Assert.Equal("Zürich", fields.GetProperty("city")[0].GetString());
            Assert.Equal(["x", "y"], fields.GetProperty("tag").EnumerateArray().Select(e => e.GetString()));
            var files = echo.GetProperty("files").EnumerateArray().ToList();
            Assert.Equal(["a.bin", "b.txt"], files.Select(f => f.GetProperty("filename").GetString()));
            Assert.All(files, f => Assert.Equal("docs", f.GetProperty("field").GetString()));
            Assert.Equal([4, 6], files.Select(f => f.GetProperty("size").GetInt32()));
        }

        // A large file (held in native memory by the host, parsed without copying by the worker).
        var large = new byte[50 * 1024 * 1024];
        new Random(12).NextBytes(large);
        using (var big = new MultipartFormDataContent())
        {
            big.Add(new StringContent("large"), "kind");
            big.Add(File(large, "application/octet-stream"), "file", "large.bin");
            var echo = await PostAsync(host, big);
            var file = Assert.Single(echo.GetProperty("files").EnumerateArray());
            Assert.Equal(large.Length, file.GetProperty("size").GetInt32());
            Assert.Equal(Convert.ToHexStringLower(SHA256.HashData(large)), file.GetProperty("sha256").GetString());
            Assert.Equal("large", echo.GetProperty("fields").GetProperty("kind")[0].GetString());
        }

        // application/x-www-form-urlencoded.
        using (var urlencoded = new FormUrlEncodedContent([new("name", "Jörg Smith"), new("tag", "a"), new("tag", "b")]))
        {
            var echo = await PostAsync(host, urlencoded);
            Assert.Equal("Jörg Smith", echo.GetProperty("fields").GetProperty("name")[0].GetString());
            Assert.Equal(2, echo.GetProperty("fields").GetProperty("tag").GetArrayLength());
            Assert.Equal(0, echo.GetProperty("files").GetArrayLength());
        }
    }

    [Fact]
    public async Task A_malformed_multipart_body_is_answered_400_naming_the_part()
    {
        using var app = FormApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        const string boundary = "b0undary";
        var body = $"--{boundary}\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n" +
                   $"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"cut.bin\"\r\n\r\nthe upload stops here";
        var content = new ByteArrayContent(Encoding.ASCII.GetBytes(body));
        content.Headers.TryAddWithoutValidation("Content-Type", $"multipart/form-data; boundary={boundary}");
        var response = await host.Http.PostAsync("/api/EchoForm", content);
        var text = await response.Content.ReadAsStringAsync();
        Assert.Equal(HttpStatusCode.BadRequest, response.StatusCode);
        Assert.Contains("part 2 (name 'file', filename 'cut.bin')", text);
        Assert.Contains("the body ends inside this part", text);

        var noBoundary = new ByteArrayContent("x"u8.ToArray());
        noBoundary.Headers.TryAddWithoutValidation("Content-Type", "multipart/form-data");
        var second = await host.Http.PostAsync("/api/EchoForm", noBoundary);
        Assert.Equal(HttpStatusCode.BadRequest, second.StatusCode);
        Assert.Contains("no boundary parameter", await second.Content.ReadAsStringAsync());
    }

    [Fact]
    public async Task Several_Set_Cookie_headers_reach_the_client_one_each()
    {
        using var app = FormApp();
        await using var host = await HostUnderTest.StartAsync(app.Directory, azurite.ConnectionString);
        var response = await host.Http.GetAsync("/api/Cookies");
        Assert.Equal(HttpStatusCode.OK, response.StatusCode);
        Assert.True(response.Headers.TryGetValues("Set-Cookie", out var cookies), "Set-Cookie headers are sent");
        Assert.Equal(["session=abc; Path=/; HttpOnly", "theme=dark; Max-Age=3600"], cookies);
        Assert.Equal(["a, b"], response.Headers.GetValues("X-Tag"));
    }
}
