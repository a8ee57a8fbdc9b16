using System.Diagnostics;
using System.Globalization;
using FaaST.Protos.Worker;

namespace FaaST.Runtime.Workers;

internal sealed partial class WorkerPool
{
    /// <summary>
    /// One worker position: starts a process, waits for it to dial in, initialises it, specialises it
    /// to the app (once the pool has one), and when the process dies or is recycled starts a new one
    /// after a backoff.
    /// </summary>
    private sealed class WorkerSlot(WorkerPool pool, int index) : IWorkerLoad
    {
        private readonly object _gate = new();
        private Process? _process;
        private WorkerChannel? _channel;
        private Task _loop = Task.CompletedTask;
        private int _incarnation;

        /// <summary>The worker's channel once it serves the app's invocations.</summary>
        public WorkerChannel? Ready { get; private set; }

        /// <summary>The worker's channel once it has answered init (on standby or specialised).</summary>
        public WorkerChannel? Initialised { get; private set; }

        public bool IsReady => Ready is { IsClosed: false };

        public int InFlight => Ready?.InFlight ?? 0;

        public string? LastError { get; private set; }

        public int ProcessId
        {
            get
            {
                lock (_gate)
                {
                    try
                    {
                        return _process is { HasExited: false } p ? p.Id : 0;
                    }
                    catch (InvalidOperationException)
                    {
                        return 0;
                    }
                }
            }
        }

        public void Start(CancellationToken stopping) => _loop = RunAsync(stopping);

        private async Task RunAsync(CancellationToken stopping)
        {
            var delay = pool._options.RestartDelay;
            while (!stopping.IsCancellationRequested)
            {
                var started = DateTime.UtcNow;
                try
                {
                    await RunOnceAsync(stopping);
                }
                catch (Exception) when (stopping.IsCancellationRequested)
                {
                    break;
                }
                catch (Exception e)
                {
                    LastError = e.Message;
                    Log.WorkerFailed(pool._logger, e, index, e.Message);
                }
                finally
                {
                    Ready = null;
                    Initialised = null;
                    pool.SignalReadyChanged();
                    // When stopping, StopAsync terminates the worker gracefully instead.
                    if (!stopping.IsCancellationRequested)
                        KillProcess();
                }
                if (stopping.IsCancellationRequested)
                    break;
                if (DateTime.UtcNow - started > pool._options.StableAfter)
                    delay = pool._options.RestartDelay;
                Log.WorkerRestarting(pool._logger, index, (int)delay.TotalMilliseconds);
                pool.Metrics?.WorkerRestarted();
                try
                {
                    await Task.Delay(delay, stopping);
                }
                catch (OperationCanceledException)
                {
                    break;
                }
                delay = TimeSpan.FromTicks(Math.Min(delay.Ticks * 2, pool._options.MaxRestartDelay.Ticks));
            }
        }

        private async Task RunOnceAsync(CancellationToken stopping)
        {
            var options = pool._options;
            var workerId = $"{options.Runtime}-{index}-{Interlocked.Increment(ref _incarnation)}-{Guid.NewGuid():N}";
            var connected = new TaskCompletionSource<WorkerChannel>(TaskCreationOptions.RunContinuationsAsynchronously);
            pool._awaiting[workerId] = connected;
            // Specialised already (a known app, or a restart after specialisation): the process
            // starts with the app's environment, as a worker of the app always did.
            var startedFor = pool.Specialization;
            Process process;
            try
            {
                process = StartProcess(workerId, startedFor);
            }
            catch (Exception e) when (e is System.ComponentModel.Win32Exception or InvalidOperationException)
            {
                pool._awaiting.TryRemove(workerId, out _);
                throw new WorkerUnavailableException($"could not start the {options.Runtime} worker: {e.Message}");
            }
            var exited = process.WaitForExitAsync(CancellationToken.None);
            WorkerChannel channel;
            using (var startup = CancellationTokenSource.CreateLinkedTokenSource(stopping))
            {
                startup.CancelAfter(options.StartupTimeout);
                var first = await Task.WhenAny(connected.Task, exited, Task.Delay(Timeout.Infinite, startup.Token));
                pool._awaiting.TryRemove(workerId, out _);
                stopping.ThrowIfCancellationRequested();
                if (first != connected.Task)
                    throw new WorkerUnavailableException(first == exited
                        ? $"the {options.Runtime} worker exited with code {SafeExitCode(process)} before connecting"
                        : $"the {options.Runtime} worker did not connect within {options.StartupTimeout.TotalSeconds:0} s");
                channel = connected.Task.Result;
            }
            lock (_gate)
                _channel = channel;
            await InitialiseAsync(channel, startedFor, stopping);
            Initialised = channel;
            pool.SignalReadyChanged();
            var ended = Task.WhenAny(exited, channel.Closed, Task.Delay(Timeout.Infinite, stopping));
            if (startedFor is null)
                Log.WorkerOnStandby(pool._logger, workerId, process.Id);
            // On standby until the pool has an app (or the worker ends first).
            if (await Task.WhenAny(pool._specialized.Task, ended) == pool._specialized.Task)
            {
                await SpecializeAsync(channel, pool._specialized.Task.Result, stopping);
                LastError = null;
                Ready = channel;
                pool.SignalReadyChanged();
                Log.WorkerReady(pool._logger, workerId, process.Id);
            }
            var end = await ended;
            Ready = null;
            Initialised = null;
            pool.SignalReadyChanged();
            stopping.ThrowIfCancellationRequested();
            var why = end == exited ? $"exited with code {SafeExitCode(process)}" : "closed its stream";
            channel.Close($"the worker process {why}");
            throw new WorkerUnavailableException($"worker {workerId} {why}");
        }

        /// <summary>The init handshake: the process-level part, the same for a standby worker and one
        /// started for its app.</summary>
        private async Task InitialiseAsync(WorkerChannel channel, WorkerSpecialization? startedFor, CancellationToken ct)
        {
            var options = pool._options;
            var request = new WorkerInitRequest
            {
                HostVersion = typeof(WorkerPool).Assembly.GetName().Version?.ToString() ?? "0",
                FunctionAppDirectory = startedFor?.App.Directory ?? "",
            };
            if (options.LoadReportInterval > TimeSpan.Zero)
                request.Capabilities[WorkerCapabilities.EventLoopUtilization] =
                    Math.Max(1, (long)options.LoadReportInterval.TotalMilliseconds).ToString(System.Globalization.CultureInfo.InvariantCulture);
            var init = await channel.RequestAsync(new StreamingMessage { WorkerInitRequest = request }, options.StartupTimeout, ct);
            var response = init.WorkerInitResponse;
            if (response.Result?.Status != StatusResult.Types.Status.Success)
                throw new WorkerUnavailableException($"worker init failed: {response.Result?.Exception?.Message}");
            channel.ReportsEventLoop = options.LoadReportInterval > TimeSpan.Zero &&
                response.Capabilities.TryGetValue(WorkerCapabilities.EventLoopUtilization, out var elu) && elu == "1";
        }

        /// <summary>
        /// Loads the app into a worker: its environment, directory and capabilities
        /// (FunctionEnvironmentReloadRequest, the same whether the process started with them or on
        /// standby), then each runnable function.
        /// </summary>
        private async Task SpecializeAsync(WorkerChannel channel, WorkerSpecialization app, CancellationToken ct)
        {
            var options = pool._options;
            var request = new FunctionEnvironmentReloadRequest { FunctionAppDirectory = app.App.Directory };
            foreach (var (name, value) in pool.EnvironmentFor(app))
                request.EnvironmentVariables[name] = value ?? "";
            foreach (var (name, value) in app.Capabilities)
                request.Capabilities[name] = value;
            var reply = await channel.RequestAsync(new StreamingMessage { FunctionEnvironmentReloadRequest = request }, options.StartupTimeout, ct);
            var response = reply.FunctionEnvironmentReloadResponse;
            if (response.Result?.Status != StatusResult.Types.Status.Success)
                throw new WorkerUnavailableException(
                    $"worker {channel.WorkerId} could not be specialised to {app.App.Name}: {response.Result?.Exception?.Message ?? response.Result?.Result}");
            channel.SharedMemory = app.Capabilities.ContainsKey(WorkerCapabilities.SharedMemory) &&
                response.Capabilities.TryGetValue(WorkerCapabilities.SharedMemory, out var shm) && shm == "1";
            channel.SharedMemoryStreaming = channel.SharedMemory &&
                response.Capabilities.TryGetValue(WorkerCapabilities.SharedMemoryStreaming, out var streaming) && streaming == "1";
            channel.SharedMemoryRelease = channel.SharedMemory &&
                response.Capabilities.TryGetValue(WorkerCapabilities.SharedMemoryRelease, out var release) && release == "1";
            if (app.Capabilities.ContainsKey(WorkerCapabilities.SharedMemory) && !channel.SharedMemory)
                Log.SharedMemoryDeclined(pool._logger, channel.WorkerId);
            await Task.WhenAll(app.App.Runnable.Select(f => LoadAsync(channel, f, ct)));
        }

        private async Task LoadAsync(WorkerChannel channel, FunctionDefinition function, CancellationToken ct)
        {
            var metadata = new FunctionMetadata
            {
                Name = function.Name,
                Directory = function.Directory,
                ScriptFile = function.ScriptFile,
                EntryPoint = function.EntryPoint,
            };
            foreach (var b in function.Bindings)
                metadata.Bindings[b.Name] = ToBindingInfo(b);
            var reply = await channel.RequestAsync(new StreamingMessage
            {
                FunctionLoadRequest = new FunctionLoadRequest { FunctionId = function.Id, Metadata = metadata },
            }, pool._options.StartupTimeout, ct);
            var result = reply.FunctionLoadResponse.Result;
            if (result?.Status == StatusResult.Types.Status.Success)
            {
                pool._loadErrors.TryRemove(function.Name, out _);
                return;
            }
            var error = result?.Exception?.Message is { Length: > 0 } m ? m : result?.Result ?? "the worker refused to load it";
            if (pool._loadErrors.TryAdd(function.Name, error))
                Log.FunctionLoadFailed(pool._logger, function.Name, error);
        }

        private static BindingInfo ToBindingInfo(BindingMetadata b) => new()
        {
            Type = b.Type,
            Direction = b.Direction switch
            {
                BindingDirection.In => BindingInfo.Types.Direction.In,
                BindingDirection.Out => BindingInfo.Types.Direction.Out,
                _ => BindingInfo.Types.Direction.Inout,
            },
            DataType = b.DataType switch
            {
                "string" => BindingInfo.Types.DataType.String,
                "binary" => BindingInfo.Types.DataType.Binary,
                "stream" => BindingInfo.Types.DataType.Stream,
                _ => BindingInfo.Types.DataType.Undefined,
            },
        };

        private Process StartProcess(string workerId, WorkerSpecialization? app)
        {
            var options = pool._options;
            var (exe, script) = options.Runtime == "python"
                ? (options.PythonExecutable, Path.Combine(options.WorkersDirectory, "python", "worker.py"))
                : (options.NodeExecutable, Path.Combine(options.WorkersDirectory, "node", "worker.js"));
            if (!File.Exists(script))
                throw new InvalidOperationException($"{script} does not exist (set FAAST_WORKERS_DIR to the workers folder)");
            var info = new ProcessStartInfo(exe)
            {
                // On standby: the worker's own folder, which the workers' user can read in any case.
                WorkingDirectory = app?.App.Directory ?? Path.GetDirectoryName(script)!,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
                UseShellExecute = false,
            };
            foreach (var arg in new[]
                     {
                         script, "--host", "127.0.0.1", "--port", pool.GrpcPort.ToString(CultureInfo.InvariantCulture),
                         "--worker-id", workerId, "--max-message-length", options.MaxMessageSize.ToString(CultureInfo.InvariantCulture),
                     })
                info.ArgumentList.Add(arg);
            info.Environment.Clear();
            foreach (var (name, value) in pool.EnvironmentFor(app))
                info.Environment[name] = value;
            // As the app's user, the worker can open the app's segments and no other app's; the host
            // (root) still reads its output files and kills it.
            options.Identity?.AsThisUser(info);
            var process = new Process { StartInfo = info, EnableRaisingEvents = true };
            process.OutputDataReceived += (_, e) => Forward(workerId, e.Data, LogLevel.Information);
            process.ErrorDataReceived += (_, e) => Forward(workerId, e.Data, LogLevel.Warning);
            process.Start();
            process.BeginOutputReadLine();
            process.BeginErrorReadLine();
            lock (_gate)
                _process = process;
            return process;
        }

        private void Forward(string workerId, string? line, LogLevel level)
        {
            // A function's print() reaches the operator's terminal: its CR and escape sequences are shown, not obeyed.
            if (line is not null)
                Log.WorkerOutputLine(pool._functionLogger, level, workerId.Split('-', 3)[0] + "-" + index, LogText.EscapeOutput(line));
        }

        /// <summary>Kills the current worker (it hung); the loop starts a new one.</summary>
        public void Recycle(string reason)
        {
            Log.WorkerRecycling(pool._logger, index, reason);
            LastError = reason;
            Ready = null;
            pool.SignalReadyChanged();
            lock (_gate)
                _channel?.Close(reason);
            KillProcess();
        }

        public async Task StopAsync(TimeSpan grace)
        {
            WorkerChannel? channel;
            Process? process;
            lock (_gate)
                (channel, process) = (_channel, _process);
            if (channel is { IsClosed: false } && process is { HasExited: false })
            {
                channel.Send(new StreamingMessage { WorkerTerminate = new WorkerTerminate { GracePeriodMs = (int)grace.TotalMilliseconds } });
                try
                {
                    await process.WaitForExitAsync().WaitAsync(grace + TimeSpan.FromSeconds(1));
                }
                catch (TimeoutException)
                {
                    Log.WorkerStopTimedOut(pool._logger, index, grace);
                }
            }
            KillProcess();
            try
            {
                await _loop;
            }
            catch (OperationCanceledException)
            {
                // stopping
            }
        }

        private void KillProcess()
        {
            Process? process;
            lock (_gate)
            {
                process = _process;
                _process = null;
                _channel = null;
            }
            if (process is null)
                return;
            var pid = 0;
            try
            {
                pid = process.Id;
                if (!process.HasExited)
                {
                    process.Kill(entireProcessTree: true);
                    process.WaitForExit(2000);
                }
            }
            catch (InvalidOperationException)
            {
                // already gone
            }
            process.Dispose();
            if (pid > 0)
                SweepOutputFiles(pid);
        }

        /// <summary>Deletes shared-memory output files a dead worker wrote but never handed over (see <see cref="FaaST.Cachelet.Memory.WorkerOutputFiles"/>).</summary>
        private void SweepOutputFiles(int pid)
        {
            if (pool.Specialization is { } app && app.Capabilities.TryGetValue(WorkerCapabilities.SharedMemoryDirectory, out var dir))
                FaaST.Cachelet.Memory.WorkerOutputFiles.Sweep(dir, pid);
        }

        private static string SafeExitCode(Process p)
        {
            try
            {
                return p.HasExited ? p.ExitCode.ToString(CultureInfo.InvariantCulture) : "?";
            }
            catch (InvalidOperationException)
            {
                return "?";
            }
        }
    }
}
